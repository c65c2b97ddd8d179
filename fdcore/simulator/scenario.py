"""What one simulation run is made of: fleet, workload and faults, all seeded; and virtual time."""

from __future__ import annotations

import functools
import math
from datetime import datetime, timezone

import attrs

from fdcore.errors import ConfigError
from fdcore.plugins.manager import CLAIM, SLOT, load_plugins

EPOCH = datetime(2027, 1, 15, tzinfo=timezone.utc)  # virtual time 0, a Friday, 00:00 UTC
ARRIVALS = ("poisson", "bursty", "all")


@attrs.frozen
class Scenario:
    """Every knob of a run. Rates are per agent per virtual hour; durations in virtual seconds."""

    seed: int = 0
    agents: int = 3
    requests: int = 100
    claim: str = "when_free"
    take_over: bool = False
    concurrency: int = 2
    poll_seconds: float = 5.0
    poll_jitter: float = 0.1  # each poll interval is poll_seconds * (1 +- jitter)
    stale_after: float = 60.0
    grace_seconds: float = 60.0
    max_attempts: int = 3
    # workload
    table_pool: int = 50  # distinct table names requests draw from (shared tables contend)
    max_tables: int = 3  # each request names 1..max_tables tables
    table_median: float = 20.0  # table run time is lognormal: this median ...
    table_sigma: float = 1.0  # ... and this spread (1.0: the slowest 1% take ~10x the median)
    arrival: str = "poisson"  # "poisson": over time at `load`; "all": every request at time 0
    load: float = 0.8  # offered work as a share of the fleet's workers (poisson, bursty)
    burst: int = 20  # "bursty": requests come in bursts of this many at once, bursts at `load`
    poison: int = 0  # requests whose table run crashes whichever agent runs it
    cancel: float = 0.0  # share of submitted requests an operator cancels (``fdcore cancel``)
    # faults
    crash_rate: float = 0.0
    restart_after: float | None = None  # longest crash-to-restart delay; default 2 * takeover time
    pause_rate: float = 0.0
    pause_max: float | None = None  # longest pause; default 3 * takeover time
    skew: float = 0.0  # each agent's clock is off by up to +-skew seconds
    latency: float = 0.0  # mean virtual seconds per store operation (delays the agent's poll)
    error_rate: float = 0.0  # chance that a store operation raises StorageUnavailable
    ambiguous: float = 0.5  # share of failed writes that applied before raising
    max_hours: float | None = None  # virtual time limit; default from the expected makespan
    # A retention job: finished requests leave requests/ and status/ this long after finishing
    # (0: never). Agents list both folders every poll, so without it a poll's cost grows with
    # every request ever made.
    archive_after: float = 3600.0
    # The product's retention instead (docs/retention.md): agents move finished requests to
    # archive/ this long after they finished, under the retention lease (0: off, the job above).
    retention_keep: float = 0.0
    # A retention process beside the fleet, as ``fdcore retention run --keep KEEP`` (grace as the
    # agents'): a run starts this long after the last one ended (0: none), its store calls
    # interleaved with the agents' (docs/simulator.md, "A retention process").
    retention_runs: float = 0.0
    retention_runs_keep: float = 1.0
    # shared schedules (invariant 1): timings like "every=1h", given to every agent
    schedules: tuple[str, ...] = ()
    unshared_schedules: tuple[str, ...] = ()  # given to agent-1 only
    schedule_hours: float = 24.0  # the schedules' due slots are judged over this long
    agent_skews: tuple[tuple[str, float], ...] = ()  # (agent, fixed skew) instead of drawn
    # Uneven fleets: (agent, factor) runs that agent's tables factor times as fast; (agent, n)
    # gives it n workers instead of `concurrency`.
    agent_speeds: tuple[tuple[str, float], ...] = ()
    agent_concurrency: tuple[tuple[str, int], ...] = ()

    def __attrs_post_init__(self) -> None:
        _check(self)

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


@functools.cache
def claim_policies() -> list[str]:
    """The claim policies the installed plugins offer (``always``, ``when_free``, any other)."""
    return sorted(load_plugins().implementations(CLAIM))


def seconds(when: datetime) -> float:
    """Virtual seconds since the start of the run (:data:`EPOCH`)."""
    return (when - EPOCH).total_seconds()


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


def _check(s: Scenario) -> None:
    where = "fdcore simulate"

    def fail(option: str, message: str) -> None:
        raise ConfigError(where, option, message)

    if s.agents < 1:
        fail("--agents", f"must be >= 1, got {s.agents}")
    if s.requests < 0:
        fail("--requests", f"must be >= 0, got {s.requests}")
    if s.poison < 0:
        fail("--poison", f"must be >= 0, got {s.poison}")
    claims = claim_policies()
    if s.claim not in claims:
        fail("--claim", f"must be one of {', '.join(claims)}, got {s.claim!r}")
    if s.burst < 1:
        fail("--burst", f"must be >= 1, got {s.burst}")
    if s.arrival not in ARRIVALS:
        fail("--arrival", f"must be one of {', '.join(ARRIVALS)}, got {s.arrival!r}")
    if not 1 <= s.concurrency <= 1024:
        fail("--concurrency", f"must be 1..1024, got {s.concurrency}")
    if s.max_attempts < 1:
        fail("--max-attempts", f"must be >= 1, got {s.max_attempts}")
    if s.table_pool < 1:
        fail("--table-pool", f"must be >= 1, got {s.table_pool}")
    if not 1 <= s.max_tables <= s.table_pool:
        fail("--max-tables", f"must be 1..table pool ({s.table_pool}), got {s.max_tables}")
    for option, value in (
        ("--poll-seconds", s.poll_seconds),
        ("--stale-after", s.stale_after),
        ("--table-median", s.table_median),
        ("--load", s.load),
    ):
        if not value > 0:
            fail(option, f"must be > 0, got {value}")
    for option, value in (
        ("--grace", s.grace_seconds),
        ("--table-sigma", s.table_sigma),
        ("--crash-rate", s.crash_rate),
        ("--pause-rate", s.pause_rate),
        ("--skew", s.skew),
        ("--latency", s.latency),
        ("--archive-after", s.archive_after),
        ("--retention-keep", s.retention_keep),
        ("--retention-runs", s.retention_runs),
    ):
        if not value >= 0:
            fail(option, f"must be >= 0, got {value}")
    for option, value, top in (
        ("--poll-jitter", s.poll_jitter, 0.5),
        ("--error-rate", s.error_rate, 0.5),
        ("--ambiguous", s.ambiguous, 1.0),
        ("--cancel", s.cancel, 1.0),
    ):
        if not 0 <= value <= top:
            fail(option, f"must be between 0 and {top:g}, got {value}")
    if not s.retention_runs_keep > 0:
        fail("--retention-runs-keep", f"must be > 0, got {s.retention_runs_keep}")
    if not s.schedule_hours > 0:
        fail("--schedule-hours", f"must be > 0, got {s.schedule_hours}")
    for option, texts in (
        ("--schedule", s.schedules),
        ("--unshared-schedule", s.unshared_schedules),
    ):
        for text in texts:
            split_timing(text, option)
    names = {f"agent-{n + 1}" for n in range(s.agents)}
    for option, pairs in (
        ("--agent-skew", s.agent_skews),
        ("--agent-speed", s.agent_speeds),
        ("--agent-concurrency", s.agent_concurrency),
    ):
        for name, _value in pairs:
            if name not in names:
                fail(option, f"no agent {name!r} (agents are agent-1..agent-{s.agents})")
    for name, skew in s.agent_skews:
        if not math.isfinite(skew):
            fail("--agent-skew", f"{name}: skew must be a number of seconds, got {skew}")
    for name, speed in s.agent_speeds:
        if not (math.isfinite(speed) and speed > 0):
            fail("--agent-speed", f"{name}: speed must be a factor > 0, got {speed}")
    for name, workers in s.agent_concurrency:
        if not 1 <= workers <= 1024:
            fail("--agent-concurrency", f"{name}: must be 1..1024 workers, got {workers}")
    for option, maybe in (
        ("--restart-after", s.restart_after),
        ("--pause-max", s.pause_max),
        ("--max-hours", s.max_hours),
    ):
        if maybe is not None and not maybe > 0:
            fail(option, f"must be > 0, got {maybe}")
