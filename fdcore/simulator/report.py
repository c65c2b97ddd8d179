"""The figures of one run, as text for people and JSON for tools (both stable for one seed)."""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import attrs

from fdcore.contract.limits import HEARTBEAT_SHARE
from fdcore.pricing import KINDS, MONTH_SECONDS, PRICES, cost
from fdcore.simulator.invariants import Checker, Violation
from fdcore.simulator.options import command_line
from fdcore.simulator.trace import Trace
from fdcore.simulator.world import World

WRITES = ("create", "replace", "delete")
SCHEDULE_FIGURES = ("slot", "unshared slot")  # checks shown on the report's schedules line


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(-(-share * len(ordered) // 1)) - 1))
    return ordered[rank]


@attrs.frozen
class Report:
    seed: int
    scenario: dict[str, Any]
    requests: dict[str, int]  # by final state; "unfinished" for the rest
    table_runs: dict[str, int]
    queue_wait_p50: float  # virtual seconds from created to first table started
    queue_wait_p99: float
    table_gap_p50: float  # virtual seconds from a table's end to its request's next table's start
    table_gap_p99: float
    worker_utilisation: float  # share of the fleet's worker time spent running tables
    stranded: int
    store_operations: dict[str, int]
    # The agents' store operations by kind per poll (reactions' aside), and per agent per
    # virtual second (all of them): what a poll costs as the fleet grows.
    operations_per_poll: dict[str, float]
    operations_per_agent_second: dict[str, float]
    store_writes: int
    writes_by_folder: dict[str, int]
    writes_per_completed: float  # agents' store writes per succeeded request
    # Writes for a succeeded one-table request's own files (request, status, its leases and
    # fences, run records), per such request; None without one.
    writes_per_one_table_request: float | None
    record_writes_per_agent_hour: float  # agents/ writes per agent per virtual hour
    record_writes_budget: float  # 3600 / (stale_after / 4): the most the heartbeat may write
    virtual_seconds: float
    wall_seconds: float
    checks: dict[str, Any]
    violations: list[Violation]
    command: str  # the ``fdcore simulate`` command that runs this seed again
    # Dollars per operation by store and kind (fdcore.pricing; ``--prices FILE`` replaces some)
    prices: dict[str, dict[str, float]] = attrs.field(factory=lambda: PRICES)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def requests_per_wall_second(self) -> float:
        done = sum(n for state, n in self.requests.items() if state != "unfinished")
        return done / self.wall_seconds if self.wall_seconds else 0.0

    def costs(self) -> dict[str, dict[str, Any]]:
        """What the agents' store operations cost on each store: per agent-month (at this
        run's rate; an idle run's is what an idle agent costs), by kind, and per 1,000
        requests that ended."""
        agent_seconds = self.scenario["agents"] * self.virtual_seconds
        ended = sum(n for state, n in self.requests.items() if state != "unfinished")
        ops = self.store_operations
        costs: dict[str, dict[str, Any]] = {}
        for store, prices in self.prices.items():
            month = MONTH_SECONDS / agent_seconds if agent_seconds else 0.0
            total = cost(ops, prices)
            costs[store] = {
                "dollars_per_agent_month": round(total * month, 4),
                "by_kind": {kind: round(ops[kind] * prices[kind] * month, 4) for kind in KINDS},
                "dollars_per_1000_requests": round(total / ended * 1000, 4) if ended else None,
            }
        return costs

    def to_json(self, wall: bool = True) -> dict[str, Any]:
        """Everything but the wall time is fixed by the seed; ``wall=False`` leaves it out."""
        data = {
            "seed": self.seed,
            "ok": self.ok,
            "scenario": self.scenario,
            "requests": self.requests,
            "table_runs": self.table_runs,
            "queue_wait_seconds": {
                "p50": round(self.queue_wait_p50, 3),
                "p99": round(self.queue_wait_p99, 3),
            },
            "table_gap_seconds": {
                "p50": round(self.table_gap_p50, 3),
                "p99": round(self.table_gap_p99, 3),
            },
            "worker_utilisation": round(self.worker_utilisation, 4),
            "stranded_requests": self.stranded,
            "store_operations": self.store_operations,
            "store_operations_per_agent_poll": self.operations_per_poll,
            "store_operations_per_agent_per_virtual_second": self.operations_per_agent_second,
            "store_writes": self.store_writes,
            "store_writes_by_folder": self.writes_by_folder,
            "store_writes_per_completed_request": round(self.writes_per_completed, 3),
            "store_writes_per_completed_one_table_request": (
                None
                if self.writes_per_one_table_request is None
                else round(self.writes_per_one_table_request, 3)
            ),
            "agent_record_writes_per_agent_hour": {
                "measured": round(self.record_writes_per_agent_hour, 1),
                "budget": round(self.record_writes_budget, 1),
            },
            "cost": self.costs(),
            "virtual_seconds": round(self.virtual_seconds, 3),
            "checks": self.checks,
            "violations": [v.to_json() for v in self.violations],
            "command": self.command,
        }
        if wall:
            data["wall_seconds"] = round(self.wall_seconds, 3)
            data["requests_per_wall_second"] = round(self.requests_per_wall_second, 1)
        return data

    def text(self) -> str:
        s = self.scenario
        uneven = [f"{name} {n} workers" for name, n in s["agent_concurrency"]]
        uneven += [f"{name} at {speed:g}x speed" for name, speed in s["agent_speeds"]]
        lines = [
            f"seed {self.seed}: {s['agents']} agents x {s['concurrency']} workers"
            + (f" ({', '.join(uneven)})" if uneven else "")
            + f", claim {s['claim']}, take_over {'on' if s['take_over'] else 'off'}",
            "requests: " + ", ".join(f"{state} {n}" for state, n in self.requests.items()),
            "table runs: " + ", ".join(f"{kind} {n}" for kind, n in self.table_runs.items()),
            f"queue wait (created -> started): p50 {self.queue_wait_p50:.1f}s, "
            f"p99 {self.queue_wait_p99:.1f}s",
            f"next table (a table's end -> its request's next table's start): "
            f"p50 {self.table_gap_p50:.2f}s, p99 {self.table_gap_p99:.2f}s; "
            f"worker utilisation {100 * self.worker_utilisation:.1f}%",
            f"stranded requests (invariant 6): {self.stranded}",
            "store operations: "
            + ", ".join(f"{kind} {n}" for kind, n in self.store_operations.items()),
            "store operations per agent-poll: "
            + ", ".join(f"{kind} {n:.2f}" for kind, n in self.operations_per_poll.items())
            + "; per agent per virtual second: "
            + ", ".join(f"{kind} {n:.3f}" for kind, n in self.operations_per_agent_second.items()),
            f"store writes: {self.store_writes} "
            f"({self.writes_per_completed:.1f} per completed request; "
            + ", ".join(f"{folder}/ {n}" for folder, n in self.writes_by_folder.items())
            + ")",
            (
                ""
                if self.writes_per_one_table_request is None
                else f"store writes per completed one-table request: "
                f"{self.writes_per_one_table_request:.2f}; "
            )
            + f"agent-record writes per agent-hour: {self.record_writes_per_agent_hour:.0f} "
            f"(budget 3600 / (stale_after / 4) = {self.record_writes_budget:.0f})",
            *self._cost_lines(),
            f"virtual time: {self.virtual_seconds / 3600:.2f} h; wall time: "
            f"{self.wall_seconds:.2f} s ({self.requests_per_wall_second:.0f} requests/s)",
        ]
        schedules = {k: v for k, v in self.checks.items() if k.startswith(SCHEDULE_FIGURES)}
        if schedules:
            lines.append(
                "schedules: " + ", ".join(f"{name} {_figure(v)}" for name, v in schedules.items())
            )
        others = {k: v for k, v in self.checks.items() if k not in schedules}
        lines.append("checks: " + ", ".join(f"{name} {_figure(v)}" for name, v in others.items()))
        if self.violations:
            lines.append(f"FAILED: {len(self.violations)} violations (seed {self.seed}):")
            lines.extend(
                f"  [{v.invariant}] t={v.time:.1f}s {v.message} (seed {self.seed})"
                for v in self.violations
            )
            lines.append(f"reproduce: {self.command}")
        else:
            lines.append("all invariants held")
        return "\n".join(lines)

    def _cost_lines(self) -> list[str]:
        lines = []
        for store, figures in self.costs().items():
            per_request = figures["dollars_per_1000_requests"]
            lines.append(
                f"cost at {store} prices: ${figures['dollars_per_agent_month']:.3f} per "
                "agent-month ("
                + ", ".join(f"{kind} ${n:.3f}" for kind, n in figures["by_kind"].items())
                + ")"
                + ("" if per_request is None else f", ${per_request:.4f} per 1,000 requests")
            )
        return lines

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)


def _figure(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def states_of(trace: Trace, request: str) -> str:
    """The request's final state, or "unfinished"."""
    latest = trace.latest.get(request)
    return latest.state if latest and latest.final else "unfinished"


def _next_table_gaps(trace: Trace) -> list[float]:
    """For each table run that ended, the wait until its request's next table started.

    The next start is the first of the same request, attempt and process after the end; a
    request's last table has none.
    """
    starts: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for start in trace.table_starts:
        starts[(start.request, start.attempt, start.incarnation)].append(start.time)
    gaps = []
    for end in trace.table_writes:
        later = starts.get((end.request, end.attempt, end.incarnation), [])
        index = bisect.bisect_left(later, end.time)
        if index < len(later):
            gaps.append(later[index] - end.time)
    return gaps


def _per(operations: Counter[str], over: float, digits: int) -> dict[str, float]:
    """Store operations by kind (and in total) divided by ``over`` (0 for nothing to divide)."""
    counts = {kind: operations[kind] for kind in ("read", "list", *WRITES)}
    counts["total"] = sum(operations.values())
    return {kind: round(n / over, digits) if over else 0.0 for kind, n in counts.items()}


def _utilisation(world: World) -> float:
    """Worker time spent in table runs that ended, over every agent's workers all run long."""
    busy = sum(end.time - end.run_started for end in world.trace.table_writes)
    workers = world.scenario.workers
    return busy / (workers * world.now) if world.now else 0.0


def build_report(
    world: World,
    checkers: Sequence[Checker],
    violations: list[Violation],
    wall_seconds: float,
) -> Report:
    """The report of a finished :class:`~fdcore.simulator.world.World`: its figures, what its
    ``checkers`` measured, and the ``violations`` they found."""
    trace = world.trace
    states: Counter[str] = Counter()
    for request in trace.created:
        states[states_of(trace, request)] += 1
    operations: Counter[str] = Counter()
    folders: Counter[str] = Counter()
    by_request: Counter[str] = Counter()
    errors = ambiguous = 0
    for agent in world.agents:
        operations.update(agent.store.operations)
        folders.update(agent.store.writes)
        by_request.update(agent.store.request_writes)
        errors += agent.store.errors
        ambiguous += agent.store.ambiguous_writes
    store = {kind: operations[kind] for kind in ("read", "list", *WRITES)}
    store["total"] = sum(operations.values())
    store["errors"] = errors
    store["ambiguous_writes"] = ambiguous
    writes = sum(operations[kind] for kind in WRITES)
    succeeded = states.get("succeeded", 0)
    waits = [
        started - trace.created[request]
        for request, started in trace.first_start.items()
        if request not in trace.poison
    ]
    gaps = _next_table_gaps(trace)
    checks: dict[str, Any] = {}
    for checker in checkers:
        checks.update(checker.summary())
    stats = world.stats
    checks.update(
        {
            "polls": stats["polls"],
            "crashes": sum(n for kind, n in stats.items() if kind.startswith("crashes")),
            "crashes by fault": stats["crashes (fault)"],  # not a poison table's
            "pauses": stats["pauses"],
            "starvation spells": stats["starvation spells"],
            "steps starved": stats["steps starved"],
        }
    )
    one_table = [
        arrival.request
        for arrival in world.plan.arrivals
        if len(arrival.table_seconds) == 1 and states_of(trace, arrival.request) == "succeeded"
    ]
    agent_hours = world.scenario.agents * world.now / 3600
    return Report(
        seed=world.scenario.seed,
        scenario=attrs.asdict(world.scenario),
        requests=dict(sorted(states.items())),
        table_runs={
            "started": stats["runs started"],
            "written": stats["table writes landed"],
            "rejected": stats["table writes rejected"],
            "cancelled": stats["runs cancelled"],
            "died": stats["runs died"],
        },
        queue_wait_p50=percentile(waits, 0.5),
        queue_wait_p99=percentile(waits, 0.99),
        table_gap_p50=percentile(gaps, 0.5),
        table_gap_p99=percentile(gaps, 0.99),
        worker_utilisation=_utilisation(world),
        stranded=checks.get("stranded requests", 0),
        store_operations=store,
        operations_per_poll=_per(world.poll_operations, stats["polls"], 3),
        operations_per_agent_second=_per(operations, world.scenario.agents * world.now, 4),
        store_writes=writes,
        writes_by_folder=dict(sorted(folders.items())),
        writes_per_completed=writes / succeeded if succeeded else 0.0,
        writes_per_one_table_request=(
            sum(by_request[r] for r in one_table) / len(one_table) if one_table else None
        ),
        record_writes_per_agent_hour=folders["agents"] / agent_hours if agent_hours else 0.0,
        record_writes_budget=3600 / (world.scenario.stale_after * HEARTBEAT_SHARE),
        virtual_seconds=world.now,
        wall_seconds=wall_seconds,
        checks=checks,
        violations=sorted(violations, key=lambda v: (v.time, v.invariant, v.message)),
        command=command_line(world.scenario),
    )
