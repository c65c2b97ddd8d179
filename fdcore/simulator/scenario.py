"""What one simulation run is made of: fleet, workload and faults, all seeded; and virtual time."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, NoReturn

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote

from fdcore.agent.declared import default_of
from fdcore.agent.settings import AgentTable, PipelineTable
from fdcore.contract.codec import converter
from fdcore.errors import ConfigError
from fdcore.plugins.manager import CLAIM, SLOT, load_plugins

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
#: The key of a Scenario field's metadata naming its ``fdcore simulate`` option.
OPTION = "option"

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def option_of(attribute: attrs.Attribute[Any]) -> str:
    """The ``fdcore simulate`` option of a Scenario field."""
    return str(attribute.metadata[OPTION])


def _fail(attribute: attrs.Attribute[Any], message: str) -> NoReturn:
    raise ConfigError(WHERE, option_of(attribute), message)


def _option(option: str, default: Any, validator: Validator) -> Any:
    return attrs.field(default=default, validator=validator, metadata={OPTION: option})


def _rule(ok: Callable[[Any], bool], expected: str) -> Validator:
    """A check of one value: "must be EXPECTED, got VALUE" unless ``ok(value)``."""

    def validate(_scenario: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not ok(value):
            _fail(attribute, f"must be {expected}, got {value}")

    return validate


def at_least(low: int) -> Validator:
    return _rule(lambda value: value >= low, f">= {low}")


def share(top: float) -> Validator:
    return _rule(lambda value: 0 <= value <= top, f"between 0 and {top:g}")


def _workers_ok(value: int) -> bool:
    return 1 <= value <= 1024


def _a_factor(value: float) -> bool:
    return math.isfinite(value) and value > 0


positive = _rule(lambda value: value > 0, "> 0")
not_negative = _rule(lambda value: value >= 0, ">= 0")
positive_or_none = _rule(lambda value: value is None or value > 0, "> 0")
workers = _rule(_workers_ok, "1..1024")


def one_of(choices: Callable[[], Sequence[str]]) -> Validator:
    def validate(_scenario: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        allowed = choices()
        if value not in allowed:
            _fail(attribute, f"must be one of {', '.join(allowed)}, got {value!r}")

    return validate


def _within_pool(scenario: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if not 1 <= value <= scenario.table_pool:
        _fail(attribute, f"must be 1..table pool ({scenario.table_pool}), got {value}")


def timings(_scenario: Any, attribute: attrs.Attribute[Any], texts: tuple[str, ...]) -> None:
    for text in texts:
        split_timing(text, option_of(attribute))


def per_agent(ok: Callable[[Any], bool], expected: str) -> Validator:
    """A check of ``(agent, value)`` pairs: the agent is in the fleet, ``ok(value)``."""

    def validate(scenario: Any, attribute: attrs.Attribute[Any], pairs: Any) -> None:
        for name, value in pairs:
            if name not in {f"agent-{n + 1}" for n in range(scenario.agents)}:
                _fail(attribute, f"no agent {name!r} (agents are agent-1..agent-{scenario.agents})")
            if not ok(value):
                _fail(attribute, f"{name}: {expected}, got {value}")

    return validate


@attrs.frozen
class Scenario:
    """Every knob of a run. Rates are per agent per virtual hour; durations in virtual seconds.

    Each field but ``seed`` and ``take_over`` names its ``fdcore simulate`` option and checks
    its value on creation: a bad one is a one-line :class:`~fdcore.errors.ConfigError` naming
    the option.
    """

    seed: int = 0
    agents: int = _option("--agents", 3, at_least(1))
    requests: int = _option("--requests", 100, at_least(0))
    claim: str = _option("--claim", "when_free", one_of(claim_policies))
    take_over: bool = False
    concurrency: int = _option("--concurrency", 2, workers)
    poll_seconds: float = _option("--poll-seconds", 5.0, positive)
    # each poll interval is poll_seconds * (1 +- jitter)
    poll_jitter: float = _option("--poll-jitter", 0.1, share(0.5))
    # agent.toml's defaults, declared once (fdcore.agent.settings)
    stale_after: float = _option("--stale-after", default_of(AgentTable, "stale_after"), positive)
    grace_seconds: float = _option(
        "--grace", default_of(PipelineTable, "grace_seconds"), not_negative
    )
    max_attempts: int = _option("--max-attempts", 3, at_least(1))
    # workload
    # distinct table names requests draw from (shared tables contend)
    table_pool: int = _option("--table-pool", 50, at_least(1))
    max_tables: int = _option("--max-tables", 3, _within_pool)  # each request names 1..this many
    # table run time is lognormal: this median and this spread (1.0: the slowest 1% ~10x)
    table_median: float = _option("--table-median", 20.0, positive)
    table_sigma: float = _option("--table-sigma", 1.0, not_negative)
    # "poisson": over time at `load`; "all": every request at time 0
    arrival: str = _option("--arrival", "poisson", one_of(lambda: ARRIVALS))
    # offered work as a share of the fleet's workers (poisson, bursty)
    load: float = _option("--load", 0.8, positive)
    # "bursty": requests come in bursts of this many at once, bursts at `load`
    burst: int = _option("--burst", 20, at_least(1))
    # requests whose table run crashes whichever agent runs it
    poison: int = _option("--poison", 0, at_least(0))
    # share of submitted requests an operator cancels (``fdcore cancel``)
    cancel: float = _option("--cancel", 0.0, share(1.0))
    # faults
    crash_rate: float = _option("--crash-rate", 0.0, not_negative)
    # longest crash-to-restart delay; default 2 * takeover time
    restart_after: float | None = _option("--restart-after", None, positive_or_none)
    pause_rate: float = _option("--pause-rate", 0.0, not_negative)
    # longest pause; default 3 * takeover time
    pause_max: float | None = _option("--pause-max", None, positive_or_none)
    # spells of CPU starvation: every step (poll, reaction) of the agent waits a while first
    starve_rate: float = _option("--starve-rate", 0.0, not_negative)
    # longest spell; default 3 * takeover time
    starve_max: float | None = _option("--starve-max", None, positive_or_none)
    # longest wait of one step in a spell; default the takeover time
    starve_step: float | None = _option("--starve-step", None, positive_or_none)
    # each agent's clock is off by up to +-skew seconds
    skew: float = _option("--skew", 0.0, not_negative)
    # mean virtual seconds per store operation (delays the agent's poll)
    latency: float = _option("--latency", 0.0, not_negative)
    # chance that a store operation raises StorageUnavailable
    error_rate: float = _option("--error-rate", 0.0, share(0.5))
    ambiguous: float = _option("--ambiguous", 0.5, share(1.0))  # failed writes that applied
    # virtual time limit; default from the expected makespan
    max_hours: float | None = _option("--max-hours", None, positive_or_none)
    # A retention job: finished requests leave requests/ and status/ this long after finishing
    # (0: never). Agents list both folders every poll, so without it a poll's cost grows with
    # every request ever made.
    archive_after: float = _option("--archive-after", 3600.0, not_negative)
    # The product's retention instead (docs/retention.md): agents move finished requests to
    # archive/ this long after they finished, under the retention lease (0: off, the job above).
    retention_keep: float = _option("--retention-keep", 0.0, not_negative)
    # A retention process beside the fleet, as ``fdcore retention run --keep KEEP`` (grace as the
    # agents'): a run starts this long after the last one ended (0: none), its store calls
    # interleaved with the agents' (docs/simulator.md, "A retention process").
    retention_runs: float = _option("--retention-runs", 0.0, not_negative)
    retention_runs_keep: float = _option("--retention-runs-keep", 1.0, positive)
    # shared schedules (invariant 1): timings like "every=1h", given to every agent
    schedules: tuple[str, ...] = _option("--schedule", (), timings)
    unshared_schedules: tuple[str, ...] = _option("--unshared-schedule", (), timings)  # agent-1's
    # the schedules' due slots are judged over this long
    schedule_hours: float = _option("--schedule-hours", 24.0, positive)
    # (agent, fixed skew) instead of drawn
    agent_skews: tuple[tuple[str, float], ...] = _option(
        "--agent-skew", (), per_agent(math.isfinite, "skew must be a number of seconds")
    )
    # Uneven fleets: (agent, factor) runs that agent's tables factor times as fast; (agent, n)
    # gives it n workers instead of `concurrency`.
    agent_speeds: tuple[tuple[str, float], ...] = _option(
        "--agent-speed", (), per_agent(_a_factor, "speed must be a factor > 0")
    )
    agent_concurrency: tuple[tuple[str, int], ...] = _option(
        "--agent-concurrency", (), per_agent(_workers_ok, "must be 1..1024 workers")
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
    """A Scenario from plain values, read by the project's strict converter (a value of the
    wrong type is refused, not coerced): anything wrong is one ConfigError naming its option."""
    try:
        return converter.structure(dict(values), Scenario)
    except cattrs.BaseValidationError as exc:
        raise _first_problem(exc) from None


def _first_problem(exc: cattrs.BaseValidationError) -> ConfigError:
    for inner in exc.exceptions:
        if isinstance(inner, ConfigError):  # a validator's
            return inner
        for note in getattr(inner, "__notes__", ()):
            if isinstance(note, AttributeValidationNote):
                field = attrs.fields_dict(Scenario)[note.name]
                option = field.metadata.get(OPTION, note.name)
                return ConfigError(WHERE, option, str(inner))
    return ConfigError(WHERE, None, str(exc))


def seconds(when: datetime) -> float:
    """Virtual seconds since the start of the run (:data:`EPOCH`)."""
    return (when - EPOCH).total_seconds()
