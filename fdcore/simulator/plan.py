"""What a seed fixes before a run starts: the plan the world plays out.

A :class:`Plan` holds the requests the world submits (when, which tables, how long each runs,
which are poison), the schedules each agent is given, and each agent's clock skew. Draws that
depend on how the run unfolds (a crash comes a while after its process started, a pause a while
after the last one ended) come from the agent's :class:`AgentPlan`, whose seeded streams (one per
purpose) answer in the order the world asks: the seed still fixes every one, and turning one
fault on does not reshuffle the others. A plan is played once: the world consumes its streams.
"""

from __future__ import annotations

import functools
import math
import random
from datetime import timedelta

import attrs

from fdcore.abc import Slot, Timetable
from fdcore.errors import ConfigError
from fdcore.plugins.manager import SLOT, Plugins, load_plugins
from fdcore.settings.agent_toml import AgentConfig, RetentionConfig, ScheduleConfig
from fdcore.simulator.scenario import EPOCH, Scenario, seconds, split_timing

UNSHARED_OWNER = "agent-1"


@functools.cache
def installed_plugins() -> Plugins:
    """Loaded once per process, before any run's wall clock starts."""
    return load_plugins()


@functools.cache
def table_names(pool: int) -> tuple[str, ...]:
    return tuple(f"t{n:03d}" for n in range(pool))


@attrs.frozen
class SimSchedule:
    """One schedule of the scenario, with the reference timetable the checker judges by."""

    config: ScheduleConfig
    owner: str | None  # the one agent given an unshared schedule; None: every agent
    timetable: Timetable

    def given_to(self, agent: str) -> bool:
        return self.owner is None or self.owner == agent

    def request_id(self, slot: str) -> str:
        """The id agents give a slot's request (docs/schedules.md), plus the owner if unshared."""
        base = f"sched-{self.config.id}-{slot}"
        return base if self.owner is None else f"{base}-{self.owner}"

    def slots(self, until: float) -> list[Slot]:
        """Every slot due in [0, until) virtual seconds."""
        found = []
        slot = self.timetable.next_due(EPOCH - timedelta(microseconds=1))
        while seconds(slot.due_at) < until:
            found.append(slot)
            slot = self.timetable.next_due(slot.due_at)
        return found


def plan_schedules(scenario: Scenario, plugins: Plugins) -> list[SimSchedule]:
    """The scenario's schedules, ids ``s1..`` (shared) and ``u1..`` (unshared), with entities
    drawn from the table pool, so scheduled runs contend with other requests for tables."""
    tables = table_names(scenario.table_pool)
    plan: list[SimSchedule] = []
    for option, prefix, owner, texts in (
        ("--schedule", "s", None, scenario.schedules),
        ("--unshared-schedule", "u", UNSHARED_OWNER, scenario.unshared_schedules),
    ):
        for n, text in enumerate(texts):
            schedule_id = f"{prefix}{n + 1}"
            timing, spec = split_timing(text, option)
            try:
                timetable = plugins.get(SLOT, timing).parse(spec, {})
            except ValueError as exc:
                raise ConfigError("fdcore simulate", option, f"{text}: {exc}") from None
            rng = random.Random(f"{scenario.seed}:schedule:{schedule_id}")
            entities = tuple(rng.sample(tables, rng.randint(1, scenario.max_tables)))
            config = ScheduleConfig(schedule_id, entities, timing, spec, shared=owner is None)
            plan.append(SimSchedule(config, owner, timetable))
    return plan


@attrs.frozen
class Arrival:
    """A request the world submits: when it arrives, its tables with each one's run time, and
    whether it is poison (its table crashes whichever agent runs it)."""

    time: float  # virtual seconds
    request: str
    table_seconds: dict[str, float]  # in the order the request names its tables
    poison: bool

    @property
    def entities(self) -> list[str]:
        return list(self.table_seconds)


def plan_arrivals(scenario: Scenario) -> list[Arrival]:
    """The submitted requests, then the poison ones among them, all drawn from one stream up
    front, so ``always`` and ``when_free`` runs of one seed get the same work."""
    s = scenario
    rng = random.Random(f"{s.seed}:workload")
    tables = table_names(s.table_pool)
    mu = math.log(s.table_median)
    when = 0.0
    times: list[tuple[float, str, bool]] = []
    for n in range(s.requests):
        if s.arrival == "poisson":
            when += rng.expovariate(s.arrival_rate)
        elif s.arrival == "bursty" and n % s.burst == 0:
            when += rng.expovariate(s.arrival_rate / s.burst)  # the same load, in bursts
        times.append((when, f"r{n + 1:06d}", False))
    span = when
    for n in range(s.poison):
        times.append((rng.uniform(0, span), f"poison-{n + 1:03d}", True))
    arrivals = []
    for when, request, poison in times:
        count = 1 if poison else rng.randint(1, s.max_tables)
        entities = rng.sample(tables, count)
        durations = {table: rng.lognormvariate(mu, s.table_sigma) for table in entities}
        arrivals.append(Arrival(when, request, durations, poison))
    return arrivals


def plan_cancels(scenario: Scenario, arrivals: list[Arrival]) -> list[tuple[float, str]]:
    """The requests an operator cancels, and when: a seeded share of the submitted ones (never
    poison), each at a moment within twice a request's expected run after it arrived, so some
    are cancelled waiting, some running, and some after they ended (a refusal)."""
    if not scenario.cancel:
        return []
    rng = random.Random(f"{scenario.seed}:cancel")
    span = 2 * scenario.mean_request_seconds
    return [
        (arrival.time + rng.uniform(0, span), arrival.request)
        for arrival in arrivals
        if rng.random() < scenario.cancel and not arrival.poison
    ]


class AgentPlan:
    """One agent machine as the seed fixes it: its clock skew, and the seeded streams its poll
    times, faults and store are drawn from (the store draws its own errors and latency)."""

    def __init__(self, scenario: Scenario, name: str) -> None:
        seed = scenario.seed
        self.scenario = scenario
        self.name = name
        drawn = random.Random(f"{seed}:skew:{name}").uniform(-scenario.skew, scenario.skew)
        self.skew = dict(scenario.agent_skews).get(name, drawn)
        self.polls = random.Random(f"{seed}:agent:{name}")
        self.faults = random.Random(f"{seed}:faults:{name}")
        self.store = random.Random(f"{seed}:store:{name}")
        # its own stream: turning starvation on reshuffles no other fault
        self.starving = random.Random(f"{seed}:starve:{name}")

    def first_poll(self) -> float:
        """When the agent first starts: somewhere in the first poll interval."""
        return self.polls.uniform(0, self.scenario.poll_seconds)

    def poll_interval(self) -> float:
        s = self.scenario
        return s.poll_seconds * self.polls.uniform(1 - s.poll_jitter, 1 + s.poll_jitter)

    def crash_after(self) -> float | None:
        """How long a process started now runs before it crashes (None: crashes are off)."""
        rate = self.scenario.crash_rate
        return self.faults.expovariate(rate / 3600) if rate else None

    def restart_after(self) -> float:
        """How long a crashed agent stays down: up to ``restart_after``, by default twice the
        takeover time, so about half the restarts come before a takeover."""
        s = self.scenario
        longest = s.restart_after if s.restart_after is not None else 2 * s.takeover_seconds
        return self.faults.uniform(s.poll_seconds, max(longest, s.poll_seconds))

    def pause_after(self) -> float | None:
        """How long until the agent's next pause (None: pauses are off)."""
        rate = self.scenario.pause_rate
        return self.faults.expovariate(rate / 3600) if rate else None

    def pause_length(self) -> float:
        """Half the pauses are shorter than stale_after, half longer than the takeover time."""
        s = self.scenario
        longest = s.pause_max if s.pause_max is not None else 3 * s.takeover_seconds
        if self.faults.random() < 0.5:
            return self.faults.uniform(s.poll_seconds, min(s.stale_after, longest))
        return self.faults.uniform(min(s.takeover_seconds, longest), longest)

    def starve_after(self) -> float | None:
        """How long until the agent's next spell of CPU starvation (None: starvation is off)."""
        rate = self.scenario.starve_rate
        return self.starving.expovariate(rate / 3600) if rate else None

    def starve_length(self) -> float:
        """A spell lasts from a poll to ``starve_max`` (default 3 x the takeover time)."""
        s = self.scenario
        longest = s.starve_max if s.starve_max is not None else 3 * s.takeover_seconds
        return self.starving.uniform(min(s.poll_seconds, longest), longest)

    def step_wait(self) -> float:
        """How long one step waits for the CPU in a spell: up to ``starve_step`` (default the
        takeover time, so some steps come after the others could judge the agent lost)."""
        s = self.scenario
        longest = s.starve_step if s.starve_step is not None else s.takeover_seconds
        return self.starving.uniform(0.0, longest)

    def poison_share(self) -> float:
        """How far into its run a poison table takes its agent down."""
        return self.faults.uniform(0.1, 0.9)


class RetentionPlan:
    """The retention process beside the fleet (``--retention-runs``): when its runs start, where
    its store calls land among the agents', which runs are killed mid-move; and its store's
    own stream of errors."""

    #: Its store calls: one per this many virtual seconds between the world's events.
    STEP = 0.05

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.runs = random.Random(f"{scenario.seed}:retention")
        self.store = random.Random(f"{scenario.seed}:store:retention")

    def next_run(self) -> float:
        """How long after the last run ended (or the start) the next one starts."""
        return self.scenario.retention_runs * self.runs.uniform(0.5, 1.5)

    def kill_after(self) -> int | None:
        """Half the runs are killed after a few store calls (a SIGKILL mid-move)."""
        return self.runs.randint(1, 60) if self.runs.random() < 0.5 else None

    def calls_before(self) -> int:
        """How many of its store calls land just before an agent's next one (mostly none)."""
        return self.runs.randint(1, 4) if self.runs.random() < 0.25 else 0


class Plan:
    """Everything one run plays out, drawn from the scenario's seed."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.arrivals = plan_arrivals(scenario)
        self.schedules = plan_schedules(scenario, installed_plugins())
        self.agents = [AgentPlan(scenario, f"agent-{n + 1}") for n in range(scenario.agents)]
        self.poison = {arrival.request for arrival in self.arrivals if arrival.poison}
        self.cancels = plan_cancels(scenario, self.arrivals)
        self.retention_process = RetentionPlan(scenario)
        self._table_seconds = {arrival.request: arrival.table_seconds for arrival in self.arrivals}

    @property
    def widest_skew(self) -> float:
        return max(abs(agent.skew) for agent in self.agents)

    @property
    def schedule_until(self) -> float:
        """How long the schedules run: past the judged period by the widest clock skew, so every
        judged slot's window is over on every agent's clock (0 without schedules)."""
        if not self.schedules:
            return 0.0
        return self.scenario.schedule_hours * 3600 + self.widest_skew

    def table_seconds(self, request: str, table: str) -> float:
        """A table's run time: drawn up front for submitted requests; for a schedule's request
        drawn from its id, so it does not depend on which agent created it."""
        planned = self._table_seconds.get(request)
        if planned is not None:
            return planned[table]
        s = self.scenario
        rng = random.Random(f"{s.seed}:table:{request}:{table}")
        return rng.lognormvariate(math.log(s.table_median), s.table_sigma)

    def agent_config(self, name: str, environment: str) -> AgentConfig:
        """What agent ``name`` is told: the scenario's timings and policies, its schedules."""
        s = self.scenario
        return AgentConfig(
            name=name,
            environment=environment,
            poll_seconds=s.poll_seconds,
            stale_after=s.stale_after,
            concurrency=s.workers_of(name),
            claim=s.claim,
            take_over=s.take_over,
            grace_seconds=s.grace_seconds,
            max_attempts=s.max_attempts,
            runner="python",
            schedules=tuple(p.config for p in self.schedules if p.given_to(name)),
            retention=self.retention(),
            source="<simulator>",
        )

    def retention(self) -> RetentionConfig:
        """The agents' retention: off unless ``retention_keep`` (then runs every keep, within
        1 to 60 minutes, so a simulated day sees many runs)."""
        keep = self.scenario.retention_keep
        if not keep:
            return RetentionConfig(enabled=False)
        return RetentionConfig(keep=keep, every=min(max(keep, 60.0), 3600.0))
