"""``/metrics``: the environment in Prometheus text, read from the mailbox on each scrape.

A custom collector (``prometheus_client``'s documented way to export figures another system
keeps): every scrape reads one :class:`~fdcore_monitor.snapshot.Fleet` through the monitor's
:class:`fdcore.Environment`, the rows ``fdcore queue`` and ``fdcore agents`` print, so the two
always agree. Counters are counted over the status files
present: a retention run that deletes old ones lowers them, which Prometheus' ``rate()`` and
``increase()`` treat as a counter reset.

The run records of a finished request never change, so their durations are read once and kept;
a request no agent has claimed (no status) has none, so nothing is read for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from fdcore.contract.models import Outcome, State
from fdcore.environment import FINAL_STATES, QueueRow
from fdcore_monitor.snapshot import Fleet, Source

AGENT_STATES = ("live", "stale", "lost", "stopped", "unreadable")
REQUEST_STATES = ("waiting", *(state.value for state in State), "unreadable")
#: Table run durations, seconds: tables run from a second to an hour or more.
BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
RUN_OUTCOMES = (Outcome.SUCCEEDED.value, Outcome.FAILED.value)


def oldest_waiting_seconds(fleet: Fleet) -> float:
    """How long the oldest request no agent has claimed has waited (0 with none waiting)."""
    created = [row.created_at for row in fleet.requests if row.state == "waiting"]
    created_at = [moment for moment in created if moment is not None]
    return max(0.0, (fleet.now - min(created_at)).total_seconds()) if created_at else 0.0


def attempt_counts(rows: Iterable[QueueRow]) -> tuple[int, int]:
    """(takeovers, lost attempts): attempts that followed a lost one, and lost attempts."""
    takeovers = lost = 0
    for row in rows:
        outcomes = [attempt.outcome for attempt in row.attempts]
        lost += outcomes.count(Outcome.LOST.value)
        takeovers += sum(1 for before in outcomes[:-1] if before == Outcome.LOST.value)
    return takeovers, lost


def _histogram(values: list[float]) -> tuple[list[tuple[str, float]], float]:
    buckets = [(str(bound), float(sum(1 for v in values if v <= bound))) for bound in BUCKETS]
    return [*buckets, ("+Inf", float(len(values)))], sum(values)


class FleetCollector(Collector):
    """The figures of one environment, read when Prometheus scrapes."""

    def __init__(self, source: Source) -> None:
        self.source = source
        # request id -> [(outcome, seconds)] of a finished request's runs (they never change)
        self._finished_runs: dict[str, list[tuple[str, float]]] = {}

    def _durations(self, fleet: Fleet) -> dict[str, list[float]]:
        durations: dict[str, list[float]] = {outcome: [] for outcome in RUN_OUTCOMES}
        for row in fleet.requests:
            for outcome, seconds in self._runs(row):
                durations.setdefault(outcome, []).append(max(0.0, seconds))
        if len(self._finished_runs) > len(fleet.requests):  # some were archived: forget them
            present = {row.id for row in fleet.requests}
            self._finished_runs = {k: v for k, v in self._finished_runs.items() if k in present}
        return durations

    def _runs(self, row: QueueRow) -> list[tuple[str, float]]:
        """(outcome, seconds) of each run of the request: listed while it runs, once when done."""
        runs = self._finished_runs.get(row.id)
        if runs is not None:
            return runs
        if row.state == "waiting":
            return []  # not claimed: no run yet
        records = self.source.environment.table_runs(row.id)  # each record read once
        runs = [(r.outcome.value, (r.ended_at - r.started_at).total_seconds()) for r in records]
        if row.state in FINAL_STATES:
            self._finished_runs[row.id] = runs
        return runs

    def collect(self) -> Iterator[Metric]:
        fleet = self.source.fleet()
        agents = GaugeMetricFamily(
            "fdcore_agents", "Agents of the environment by state (fdcore agents).", labels=["state"]
        )
        counted = Counter(row.state for row in fleet.agents)
        for state in AGENT_STATES:
            agents.add_metric([state], counted[state])
        yield agents

        requests = GaugeMetricFamily(
            "fdcore_requests", "Requests by state (fdcore queue).", labels=["state"]
        )
        counted = Counter(row.state for row in fleet.requests)
        for state in REQUEST_STATES:
            requests.add_metric([state], counted[state])
        yield requests

        yield GaugeMetricFamily(
            "fdcore_queue_oldest_waiting_seconds",
            "Age of the oldest request no agent has claimed (0 when none waits).",
            value=oldest_waiting_seconds(fleet),
        )
        running = GaugeMetricFamily(
            "fdcore_agent_running_tables",
            "Tables each agent runs now, and its concurrency.",
            labels=["agent", "kind"],
        )
        for row in fleet.agents:
            running.add_metric([row.name, "running"], row.running)
            running.add_metric([row.name, "concurrency"], row.concurrency)
        yield running

        durations = HistogramMetricFamily(
            "fdcore_table_run_duration_seconds",
            "Table runs by duration, from their run records.",
            labels=["outcome"],
        )
        for outcome, values in sorted(self._durations(fleet).items()):
            buckets, total = _histogram(values)
            durations.add_metric([outcome], buckets, total)
        yield durations

        takeovers, lost = attempt_counts(fleet.requests)
        yield CounterMetricFamily(
            "fdcore_takeovers",
            "Attempts that took a request over from a lost agent (statuses' attempts).",
            value=takeovers,
        )
        yield CounterMetricFamily(
            "fdcore_lost_attempts",
            "Attempts whose agent was lost (statuses' attempts).",
            value=lost,
        )


def registry(source: Source) -> CollectorRegistry:
    """A registry of the environment's figures alone (no process metrics of the monitor)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(FleetCollector(source))
    return found
