"""What the work cost: each table run's store operations and wall time, priced and added up by
run, request, schedule, owner or agent (``fdcore cost``, :meth:`Environment.cost`).

A run record carries the store operations its agent made for that table (its lease, the status
changes it caused, the record itself) and the agent's compute rate; its wall time is its start
to its end. What the agents did outside any table run (polls, heartbeats, claims, schedules,
retention) is their status records' count of every operation since they first counted, less
their runs': shown as its own row, :data:`NOT_IN_ANY_RUN`, so the rows add up to what the
agents paid. The table process's own writes (its fenced writes) are made by another process
and counted by none (docs/operations.md, "What a run costs").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs

from fdcore.contract.codec import format_time
from fdcore.contract.layout import agent_key, archived_runs_prefix
from fdcore.contract.models import AgentRecord, RunRecord
from fdcore.environment.views import QueueRow
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import read_runs
from fdcore.pricing import KINDS, PRICES, cost

__all__ = [
    "COST_GROUPS",
    "NOT_IN_ANY_RUN",
    "CostReport",
    "CostRow",
    "CostedRun",
    "cost_report",
    "runs_of",
]

#: What ``fdcore cost --by`` groups runs by.
COST_GROUPS = ("run", "request", "schedule", "owner", "agent")
#: The row of the operations the agents made outside every table run.
NOT_IN_ANY_RUN = "not in any run"
#: The group of a run whose request has no schedule, or whose owner nobody names.
NONE = "-"


@attrs.frozen
class CostRow:
    """One group's runs: how many, their wall time, store operations by kind, and the price."""

    key: str  # the run (request/attempt/table), request, schedule, owner or agent
    runs: int
    seconds: float  # the runs' wall time
    operations: Mapping[str, int]  # by kind (fdcore.pricing.KINDS)
    store_dollars: float
    compute_dollars: float
    # runs whose record does not count its operations (an agent of an earlier release)
    uncounted: int = 0

    @property
    def dollars(self) -> float:
        """Store and compute together."""
        return self.store_dollars + self.compute_dollars

    @property
    def total_operations(self) -> int:
        """Its store operations of every kind."""
        return sum(self.operations.values())

    def to_json(self) -> dict[str, Any]:
        """The row as ``fdcore cost --json`` prints it in ``rows``."""
        return {
            "key": self.key,
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "operations": {kind: self.operations.get(kind, 0) for kind in KINDS},
            "total_operations": self.total_operations,
            "uncounted_runs": self.uncounted,
            "store_dollars": round(self.store_dollars, 6),
            "compute_dollars": round(self.compute_dollars, 6),
            "dollars": round(self.dollars, 6),
        }


@attrs.frozen
class CostReport:
    """The rows of one ``fdcore cost``: the groups (most expensive first), then
    :data:`NOT_IN_ANY_RUN` when it is known (not with ``since``: the agents count it from their
    start, not by time), and their total."""

    by: str
    store: str | None  # the price table used (fdcore.pricing.PRICES); None: not priced
    since: datetime | None
    rows: list[CostRow]
    total: CostRow

    def to_json(self) -> dict[str, Any]:
        """The report as ``fdcore cost --json`` prints it."""
        return {
            "by": self.by,
            "store": self.store,
            "since": format_time(self.since) if self.since else None,
            "rows": [row.to_json() for row in self.rows],
            "total": self.total.to_json(),
        }


@attrs.frozen
class CostedRun:
    """A table run as cost reads it: its request, the request's schedule, its record."""

    request: str
    schedule: str | None
    record: RunRecord


def runs_of(
    mailbox: Mailbox, rows: Iterable[QueueRow], live_runs: Callable[[str], list[RunRecord]]
) -> Iterator[CostedRun]:
    """The runs of the requests ``rows``: a live one's from ``live_runs(id)``, an archived
    one's read from the archive (one listing each)."""
    for row in rows:
        if row.archived is not None:
            records = read_runs(mailbox, archived_runs_prefix(row.archived, row.id))
        else:
            records = live_runs(row.id)
        for record in records:
            yield CostedRun(row.id, row.schedule, record)


def cost_report(
    mailbox: Mailbox,
    runs: Iterable[CostedRun],
    *,
    by: str,
    store: str | None,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    since: datetime | None = None,
    whole_fleet: bool = True,
) -> CostReport:
    """Price ``runs`` at ``prices[store]`` (default: the built-in tables; no ``store``: their
    operations unpriced) grouped ``by`` one of :data:`COST_GROUPS`, only those ended at or
    after ``since``; with ``whole_fleet`` (every run of the environment) and no ``since``, the
    :data:`NOT_IN_ANY_RUN` row from the agents' records."""
    if by not in COST_GROUPS:
        raise ValueError(f"by must be one of {', '.join(COST_GROUPS)}, got {by!r}")
    table = dict.fromkeys(KINDS, 0.0) if store is None else (prices or PRICES).get(store)
    if table is None:
        raise ValueError(f"store must be one of {', '.join(prices or PRICES)}, got {store!r}")
    every = list(runs)
    fleet = whole_fleet and since is None
    # the agents' records: whom a run is charged to, and what no run made
    agents = (
        {found.value.name: found.value for found in _agent_records(mailbox)}
        if fleet or by == "owner"
        else {}
    )
    chosen = [run for run in every if since is None or run.record.ended_at >= since]
    grouped: dict[str, list[CostedRun]] = {}
    for run in chosen:
        grouped.setdefault(_key(run, by, agents), []).append(run)
    priced = [_row(key, group, table) for key, group in grouped.items()]
    priced.sort(key=lambda row: (-row.dollars, row.key))
    if fleet:
        outside = _outside_runs(agents.values(), every)
        if outside is not None:
            priced.append(_priced(NOT_IN_ANY_RUN, 0, 0.0, outside, 0.0, 0, table))
    total = _priced(
        "total",
        sum(row.runs for row in priced),
        sum(row.seconds for row in priced),
        sum((Counter(row.operations) for row in priced), Counter()),
        sum(row.compute_dollars for row in priced),
        sum(row.uncounted for row in priced),
        table,
    )
    return CostReport(by, store, since, priced, total)


def _agent_records(mailbox: Mailbox) -> Iterable[Any]:
    """Every readable agent record (a malformed one is reported once and left out)."""
    for name in mailbox.agent_names():
        found = mailbox.read_or_report(AgentRecord, agent_key(name))
        if found is not None:
            yield found


def _key(run: CostedRun, by: str, agents: Mapping[str, AgentRecord]) -> str:
    record = run.record
    if by == "run":
        return f"{run.request}/{record.attempt}/{record.table}"
    if by == "request":
        return run.request
    if by == "schedule":
        return run.schedule or NONE
    if by == "agent":
        return record.agent
    return _owner(run, agents) or NONE


def _owner(run: CostedRun, agents: Mapping[str, AgentRecord]) -> str | None:
    """Whom a run is charged to: its schedule's owner as the agent that ran it publishes it
    (the agent's own unless the schedule names one), else that agent's owner."""
    agent = agents.get(run.record.agent)
    if agent is None:
        return None
    for schedule in agent.schedules:
        if schedule.id == run.schedule and schedule.owner:
            return schedule.owner
    return agent.owner


def _row(key: str, runs: list[CostedRun], prices: Mapping[str, float]) -> CostRow:
    operations: Counter[str] = Counter()
    seconds = compute = 0.0
    uncounted = 0
    for run in runs:
        record = run.record
        wall = max((record.ended_at - record.started_at).total_seconds(), 0.0)
        seconds += wall
        compute += wall / 3600 * (record.compute_per_hour or 0.0)
        if record.operations is None:
            uncounted += 1
        else:
            operations.update(record.operations)
    return _priced(key, len(runs), seconds, operations, compute, uncounted, prices)


def _priced(
    key: str,
    runs: int,
    seconds: float,
    operations: Mapping[str, int],
    compute: float,
    uncounted: int,
    prices: Mapping[str, float],
) -> CostRow:
    counts = {kind: int(operations.get(kind, 0)) for kind in KINDS}
    return CostRow(key, runs, seconds, counts, cost(counts, prices), compute, uncounted)


def _outside_runs(agents: Iterable[AgentRecord], runs: list[CostedRun]) -> Counter[str] | None:
    """Each counting agent's operations less its runs', added up; None if no agent counts.

    An agent's record counts up to its last write, and a run it recorded after that write is
    in its runs already: such a kind's difference is taken as 0, never below."""
    in_runs: dict[str, Counter[str]] = {}
    for run in runs:
        if run.record.operations is not None:
            in_runs.setdefault(run.record.agent, Counter()).update(run.record.operations)
    outside: Counter[str] | None = None
    for agent in agents:
        if agent.operations is None:
            continue
        outside = outside if outside is not None else Counter()
        ran = in_runs.get(agent.name, Counter())
        for kind in KINDS:
            outside[kind] += max(agent.operations.get(kind, 0) - ran[kind], 0)
    return outside
