"""What one simulation run is made of: fleet, workload and faults, all seeded; and virtual time."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import attrs

from fdcore.errors import ConfigError
from fdcore.plugins.manager import CLAIM, SLOT, load_plugins
from fdcore.settings.agent_toml import AgentTable, PipelineTable
from fdcore.settings.checks import Invalid, Number, OneOf, PerName, Seconds, Whole
from fdcore.settings.declare import FLAG, check_of, default_of, setting, structure

EPOCH = datetime(2027, 1, 15, tzinfo=timezone.utc)  # virtual time 0, a Friday, 00:00 UTC
ARRIVALS = ("poisson", "bursty", "all")


@functools.cache
def claim_policies() -> list[str]:
    """The claim policies the installed plugins offer (``always``, ``when_free``, any other)."""
    return sorted(load_plugins().implementations(CLAIM))


def split_timing(text: str, option: str) -> tuple[str, str]:
    """``"every=1h"`` -> ("every", "1h"); a ConfigError naming ``option`` otherwise."""
    timing, equals, spec = text.partition("=")
    timings = list(load_plugins().implementations(SLOT))  # the installed slot functions' keys
    if not equals or timing not in timings or not spec.strip():
        raise ConfigError(
            "fdcore simulate",
            option,
            f"expected TIMING=SPEC with TIMING one of {', '.join(timings)} "
            f"(e.g. every=1h), got {text!r}",
        )
    return timing, spec


WHERE = "fdcore simulate"
DAY = 86400.0
#: Rates are per agent per virtual hour: at most one a second.
RATE = Number(0, 3600)
HOURS = Number(0.001, 24 * 366)


def _option(flag: str, default: Any, check: Any, help: str, *, factory: Any = None) -> Any:
    """A scenario field: its ``fdcore simulate`` flag, default, check and help, declared once
    (the flags, the command that runs a scenario again and :func:`scenario_of` read them)."""
    if factory is not None:
        return setting(factory=factory, help=help, check=check, flag=flag)
    return setting(default, help=help, check=check, flag=flag)


def option_of(attribute: attrs.Attribute[Any]) -> str:
    """The ``fdcore simulate`` flag of a Scenario field."""
    return str(attribute.metadata[FLAG])


def _within_pool(scenario: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if not 1 <= value <= scenario.table_pool:
        raise Invalid(
            (attribute.name,), f"must be 1..table pool ({scenario.table_pool}), got {value}"
        )


def _timings(_scenario: Any, attribute: attrs.Attribute[Any], texts: tuple[str, ...]) -> None:
    for text in texts:
        try:
            split_timing(text, option_of(attribute))
        except ConfigError as exc:
            raise Invalid((attribute.name,), exc.message) from None


def _in_fleet(scenario: Any, attribute: attrs.Attribute[Any], pairs: Any) -> None:
    """Each ``NAME=VALUE`` names an agent of the fleet."""
    for name, _value in pairs:
        if name not in {f"agent-{n + 1}" for n in range(scenario.agents)}:
            raise Invalid(
                (attribute.name,),
                f"no agent {name!r} (agents are agent-1..agent-{scenario.agents})",
            )


@attrs.frozen
class Scenario:
    """Every knob of a run. Rates are per agent per virtual hour; durations in virtual seconds.

    Each field is declared once with its ``fdcore simulate`` flag, default, check and help
    (:mod:`fdcore.settings`); a bad value is refused on creation, and :func:`scenario_of` makes
    it one line naming the flag.
    """

    seed: int = _option("--seed", 0, Whole(0, 2**63), "seed of the (first) run")
    agents: int = _option("--agents", 3, Whole(1, 1000), "agents in the fleet")
    requests: int = _option("--requests", 100, Whole(0, 10_000_000), "requests submitted")
    claim: str = _option(
        "--claim",
        "when_free",
        OneOf(claim_policies, "claim policy"),
        "claim policy: always, when_free or one a plugin adds",
    )
    take_over: bool = _option("--take-over", False, None, "agents take over lost agents' requests")
    concurrency: int = _option(
        "--concurrency", 2, check_of(AgentTable, "concurrency"), "workers per agent"
    )
    poll_seconds: float = _option(
        "--poll-seconds",
        default_of(AgentTable, "poll_seconds"),
        check_of(AgentTable, "poll_seconds"),
        "seconds between an agent's polls",
    )
    poll_jitter: float = _option(  # each poll interval is poll_seconds * (1 +- jitter)
        "--poll-jitter", 0.1, Number(0, 0.5), "poll interval spread, a share of poll-seconds"
    )
    # agent.toml's defaults, declared once (fdcore.settings.agent_toml)
    stale_after: float = _option(
        "--stale-after",
        default_of(AgentTable, "stale_after"),
        check_of(AgentTable, "stale_after"),
        "an agent's record is stale after this",
    )
    grace_seconds: float = _option(
        "--grace",
        default_of(PipelineTable, "grace_seconds"),
        check_of(PipelineTable, "grace_seconds"),
        "seconds past stale-after before an agent is lost",
    )
    max_attempts: int = _option(
        "--max-attempts",
        default_of(PipelineTable, "max_attempts"),
        check_of(PipelineTable, "max_attempts"),
        "lost attempts before a request fails",
    )
    # workload
    table_pool: int = _option(
        "--table-pool", 50, Whole(1, 1_000_000), "distinct table names (shared tables contend)"
    )
    max_tables: int = _option(
        "--max-tables",
        3,
        [Whole(1, 10_000), _within_pool],
        "each request names 1..this many tables",
    )
    # table run time is lognormal: this median and this spread (1.0: the slowest 1% ~10x)
    table_median: float = _option(
        "--table-median", 20.0, Seconds(), "median table run, seconds (lognormal)"
    )
    table_sigma: float = _option(
        "--table-sigma", 1.0, Number(0, 10), "spread of table runs (lognormal sigma)"
    )
    arrival: str = _option(
        "--arrival",
        "poisson",
        OneOf(ARRIVALS, "arrival"),
        "poisson (over time), bursty (in bursts) or all (at once)",
    )
    load: float = _option(
        "--load", 0.8, Number(0.001, 1000), "offered work as a share of the fleet's workers"
    )
    burst: int = _option(
        "--burst", 20, Whole(1, 10_000_000), "requests per burst (--arrival bursty)"
    )
    poison: int = _option(
        "--poison", 0, Whole(0, 1_000_000), "requests that crash whichever agent runs them"
    )
    cancel: float = _option(
        "--cancel", 0.0, Number(0, 1), "share of requests an operator cancels (fdcore cancel)"
    )
    # faults
    crash_rate: float = _option("--crash-rate", 0.0, RATE, "crashes per agent per virtual hour")
    restart_after: float | None = _option(  # default 2 * takeover time
        "--restart-after", None, Seconds(), "longest crash-to-restart delay, seconds"
    )
    pause_rate: float = _option("--pause-rate", 0.0, RATE, "pauses per agent per virtual hour")
    pause_max: float | None = _option(  # default 3 * takeover time
        "--pause-max", None, Seconds(), "longest pause, seconds"
    )
    # spells of CPU starvation: every step (poll, reaction) of the agent waits a while first
    starve_rate: float = _option(
        "--starve-rate", 0.0, RATE, "spells of CPU starvation per agent per virtual hour"
    )
    starve_max: float | None = _option(  # default 3 * takeover time
        "--starve-max", None, Seconds(), "longest spell of CPU starvation, seconds"
    )
    starve_step: float | None = _option(  # default the takeover time
        "--starve-step", None, Seconds(), "longest wait of one step in a spell, seconds"
    )
    skew: float = _option(
        "--skew",
        0.0,
        Seconds(zero_allowed=True, maximum=DAY),
        "each agent's clock is off by up to +-this many seconds",
    )
    latency: float = _option(  # delays the agent's poll
        "--latency", 0.0, Seconds(zero_allowed=True), "mean seconds per store operation"
    )
    error_rate: float = _option(  # a store operation raises StorageUnavailable
        "--error-rate", 0.0, Number(0, 0.5), "chance a store operation fails transiently"
    )
    ambiguous: float = _option(
        "--ambiguous", 0.5, Number(0, 1), "share of failed writes that applied anyway"
    )
    max_hours: float | None = _option(  # default from the expected makespan
        "--max-hours", None, HOURS, "virtual time limit, hours"
    )
    # A retention job: finished requests leave requests/ and status/ this long after finishing
    # (0: never). Agents list both folders every poll, so without it a poll's cost grows with
    # every request ever made.
    archive_after: float = _option(
        "--archive-after",
        3600.0,
        Seconds(zero_allowed=True),
        "finished requests leave the mailbox after (0: never)",
    )
    # The product's retention instead (docs/retention.md): agents move finished requests to
    # archive/ this long after they finished, under the retention lease (0: off, the job above).
    retention_keep: float = _option(
        "--retention-keep",
        0.0,
        Seconds(zero_allowed=True),
        "agents archive finished requests after this, the product's retention (0: off)",
    )
    # A retention process beside the fleet, as ``fdcore retention run --keep KEEP`` (grace as the
    # agents'): a run starts this long after the last one ended (0: none), its store calls
    # interleaved with the agents' (docs/simulator.md, "A retention process").
    retention_runs: float = _option(
        "--retention-runs",
        0.0,
        Seconds(zero_allowed=True),
        "a retention run process starts this long after the last ended (0: none)",
    )
    retention_runs_keep: float = _option(
        "--retention-runs-keep", 1.0, Seconds(), "the --keep of those runs, seconds"
    )
    # shared schedules (invariant 1): timings like "every=1h", given to every agent
    schedules: tuple[str, ...] = _option(
        "--schedule", (), _timings, "a schedule every agent shares, e.g. every=1h"
    )
    unshared_schedules: tuple[str, ...] = _option(
        "--unshared-schedule", (), _timings, "a schedule of agent-1 alone, e.g. every=30m"
    )
    schedule_hours: float = _option(
        "--schedule-hours", 24.0, HOURS, "the schedules' slots are judged over this"
    )
    # (agent, fixed skew) instead of drawn
    agent_skews: tuple[tuple[str, float], ...] = _option(
        "--agent-skew",
        (),
        [PerName(Number(-DAY, DAY), "NAME=SECONDS (e.g. agent-1=-30)"), _in_fleet],
        "NAME=SECONDS: that agent's clock skew, instead of one drawn from --skew",
    )
    # Uneven fleets: (agent, factor) runs that agent's tables factor times as fast; (agent, n)
    # gives it n workers instead of `concurrency`.
    agent_speeds: tuple[tuple[str, float], ...] = _option(
        "--agent-speed",
        (),
        [PerName(Number(0.001, 1000), "NAME=FACTOR (e.g. agent-1=0.5)"), _in_fleet],
        "NAME=FACTOR: that agent runs its tables FACTOR times as fast",
    )
    agent_concurrency: tuple[tuple[str, int], ...] = _option(
        "--agent-concurrency",
        (),
        [PerName(check_of(AgentTable, "concurrency"), "NAME=WORKERS (e.g. agent-1=8)"), _in_fleet],
        "NAME=WORKERS: that agent's workers, instead of --concurrency",
    )

    @property
    def scheduled(self) -> bool:
        return bool(self.schedules or self.unshared_schedules)

    @property
    def takeover_seconds(self) -> float:
        """How long a silent agent's record takes to be judged lost."""
        return self.stale_after + self.grace_seconds

    def workers_of(self, agent: str) -> int:
        return dict(self.agent_concurrency).get(agent, self.concurrency)

    def speed_of(self, agent: str) -> float:
        return dict(self.agent_speeds).get(agent, 1.0)

    @property
    def workers(self) -> int:
        """The fleet's workers: every agent's concurrency added up."""
        return sum(self.workers_of(f"agent-{n + 1}") for n in range(self.agents))

    @property
    def mean_table_seconds(self) -> float:
        return self.table_median * math.exp(self.table_sigma**2 / 2)

    @property
    def mean_request_seconds(self) -> float:
        """Expected work of one request, counting the poll that notices each table's end."""
        return (1 + self.max_tables) / 2 * (self.mean_table_seconds + self.poll_seconds / 2)

    @property
    def arrival_rate(self) -> float:
        """Poisson arrivals per virtual second that offer `load` of the fleet's workers."""
        if not self.agent_concurrency:  # this order of operations keeps seeded runs as they were
            return self.load * self.agents * self.concurrency / self.mean_request_seconds
        return self.load * self.workers / self.mean_request_seconds

    @property
    def time_limit(self) -> float:
        """Virtual seconds after which an unfinished request counts as lost."""
        if self.max_hours is not None:
            return self.max_hours * 3600
        total = self.requests + self.poison
        span = 0.0 if self.arrival == "all" else total / self.arrival_rate
        work = total * self.mean_request_seconds / self.workers
        scheduled = self.schedule_hours * 3600 if self.scheduled else 0.0
        # time for the last requests to finish, even after every agent was down a long while
        drain = 6 * 3600 + (self.restart_after or 0.0)
        return 4 * (span + work) + drain + scheduled


def scenario_of(values: Mapping[str, Any]) -> Scenario:
    """A Scenario from plain values, read strictly (a value of the wrong type is refused, not
    coerced): anything wrong is one ConfigError naming its flag."""
    return structure(Scenario, values, WHERE)


def seconds(when: datetime) -> float:
    """Virtual seconds since the start of the run (:data:`EPOCH`)."""
    return (when - EPOCH).total_seconds()
