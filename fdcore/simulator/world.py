"""The seeded discrete-event world: it plays a :class:`~fdcore.simulator.plan.Plan` out with
real agents, one virtual clock and one in-memory store, and records what happened.

Each agent is a real :class:`fdcore.agent.core.Agent`, unchanged, built the way the runtime
builds one (:func:`fdcore.agent.components.build_components`), with three things swapped for
simulated ones:

* its clock is a view of the world's virtual clock, off by the agent's skew;
* its storage is a :class:`~fdcore.simulator.store.FaultyStore` over the shared in-memory store;
* its table runner starts :class:`SimRun` objects that end at a planned virtual time and then
  write the table through :func:`fdcore.mailbox.fencing.fenced_write`, as a real table would.

Events (agent polls, run ends, request arrivals, crashes, restarts, pauses, resumes) sit in one
heap ordered by (virtual time, sequence number), so a seed fixes the whole run. A poll is atomic
in virtual time: the store latency it met only delays that agent's next poll. Between polls an
agent reacts (:meth:`~fdcore.agent.core.Agent.react`) when one of its runs ends and when a slot
of its schedules falls due, as the runtime wakes it. Agents given schedules create those
requests themselves.

The world writes the :class:`~fdcore.simulator.trace.Trace` and calls the live hooks of the
checkers it is given (:class:`Watcher`); it imports none of them. Judging the finished run is
the checkers' ``finish``, called by whoever built the world (:mod:`fdcore.simulator.simulation`).
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import attrs

from fdcore.abc import AgentLoad, ClaimPolicy, Storage, TableJob, TableResult, TableRun
from fdcore.agent.components import Components, StartTable, build_components
from fdcore.agent.core import Agent
from fdcore.agent.schedules import Schedule, build_schedules
from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.layout import CANCELS, agent_key, cancel_key, request_key, status_key
from fdcore.contract.models import Request, State
from fdcore.errors import NotFound, RequestError, StaleFencingToken
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.counting import CountingStore
from fdcore.mailbox.fencing import fenced_write
from fdcore.mailbox.submit import submit
from fdcore.settings.agent_toml import AgentConfig
from fdcore.simulator.decoder import TraceDecoder
from fdcore.simulator.plan import AgentPlan, Arrival, Plan, RetentionPlan, installed_plugins
from fdcore.simulator.retention import RetentionProcess
from fdcore.simulator.scenario import EPOCH, seconds
from fdcore.simulator.store import FaultyStore
from fdcore.simulator.trace import (
    CancelsSeen,
    Crash,
    Pause,
    PollRecord,
    ScheduleCreate,
    Start,
    StatusWrite,
    TableStart,
    TableWrite,
    Trace,
)

#: Builds an agent's parts from its config, its (faulty) store and the simulated runner.
PartsFactory = Callable[[AgentConfig, Storage, StartTable], Components]
#: Builds a new agent process's schedules from its config (``config.schedules``).
SchedulesFactory = Callable[[AgentConfig], list[Schedule]]


# An agent woken for a due slot wakes this long after it, so the slot is due on its clock too.
DUE_MARGIN = 0.001
#: Actions between two ``gc.freeze()`` of a run: it keeps its trace and every agent's index, ever
#: larger, and each full collection would walk all of them again (a tenth of a 100-agent run).
FREEZE_EVERY = 5_000


def default_parts(config: AgentConfig, storage: Storage, start_table: StartTable) -> Components:
    """The parts the agent's config names, resolved through the installed plugins."""
    return build_components(config, installed_plugins(), storage, start_table)


def default_schedules(config: AgentConfig) -> list[Schedule]:
    """The agent's schedules with the installed slot functions, as the runtime builds them."""
    return build_schedules(config, installed_plugins())


class Watcher(Protocol):
    """What the world calls while it runs (every :class:`fdcore.simulator.invariants.Checker`
    has these hooks): state is consistent at each call."""

    def after_poll(self, world: World, agent: SimulatedAgent) -> None: ...

    def after_reaction(self, world: World, agent: SimulatedAgent) -> None: ...

    def after_change(self, world: World) -> None: ...


class VirtualClock:
    """An agent's view of the world's clock: virtual time plus the agent's skew.

    It stands still within a poll: a poll is atomic, so its writes land at the time it read.
    The time its store calls took delays the agent's next poll instead.
    """

    def __init__(self, world: World, skew: float) -> None:
        self.world = world
        self.skew = skew
        self._last: tuple[float, datetime] | None = None  # (world time, now)

    def now(self) -> datetime:
        # Asked many times within one poll, at one world time: made once per time.
        last, at = self._last, self.world.now
        if last is not None and last[0] == at:
            return last[1]
        now = EPOCH + timedelta(seconds=at + self.skew)
        self._last = (at, now)
        return now


class SimRun:
    """A simulated table run: ends at a virtual time, then writes its table fenced."""

    def __init__(self, agent: SimulatedAgent, job: TableJob, started: float, end: float) -> None:
        self.agent = agent
        self.job = job
        self.incarnation = agent.incarnation
        self.started = started
        self.end = end
        self.remaining = 0.0  # while frozen by a pause
        self.version = 0  # bumped to void a scheduled end (pause, crash)
        self.state = "running"  # running | ended | cancelled | died
        self.result: TableResult | None = None

    def poll(self) -> TableResult | None:
        return self.result

    def cancel(self) -> None:
        if self.state == "running":
            self.state = "cancelled"
            self.agent.runs.pop(id(self), None)
            self.agent.world.stats["runs cancelled"] += 1


class WatchedClaim:
    """The agent's claim policy, noting a "no" inside a poll before the poll's first claim.

    The sweep for requests under way (taken over, or the agent's own whose answers were lost)
    comes before claims: a "no" then means the poll's room went to such requests.
    """

    def __init__(self, inner: ClaimPolicy, agent: SimulatedAgent) -> None:
        self.inner = inner
        self.name = inner.name
        self.agent = agent

    def may_claim(self, load: AgentLoad) -> bool:
        allowed = self.inner.may_claim(load)
        agent = self.agent
        if not allowed and agent.polling and not agent.claimed:
            agent.room_spent = True
        return allowed


class SimulatedAgent:
    """One agent name as the simulation runs it: its clock skew, store view and seeded streams
    (its :class:`~fdcore.simulator.plan.AgentPlan`), and the :class:`Agent` process running
    under that name now (``process``; a new one after each crash, ``incarnation`` counts them)."""

    def __init__(self, world: World, plan: AgentPlan) -> None:
        scenario = world.scenario
        self.world = world
        self.plan = plan
        self.name = plan.name
        self.skew = plan.skew
        self.speed = scenario.speed_of(plan.name)  # its tables run this many times as fast
        self.store = FaultyStore(
            world.store,
            self._tap,
            plan.store,
            scenario.error_rate,
            scenario.ambiguous,
            scenario.latency,
            self._created,
            VirtualClock(world, 0.0).now,  # the store's clock: true time
        )
        self.store.listed_cancels = self._listed_cancels
        self.clock = VirtualClock(world, self.skew)
        self.record_key = agent_key(self.name)
        self.process: Agent | None = None
        self.incarnation = 0
        self.polls = 0  # in this incarnation
        self.paused: Pause | None = None
        self.poll_token = 0  # a new poll chain voids the old one
        self.runs: dict[int, SimRun] = {}  # running table runs (insertion order: deterministic)
        self.due_wake: float | None = None  # the pending wake for a schedule's next due slot
        # The end of the agent's last step's store calls: the runtime's one thread is busy
        # until then, so a poll or reaction due earlier waits for it.
        self.busy_until = 0.0
        # In a spell of CPU starvation until then: each step waits for the CPU first (a step
        # whose wait is over is ``waited``).
        self.starved_until = 0.0
        self.waited = False
        # within the current poll: a new request claimed; the claim policy said no before it
        self.polling = self.claimed = self.room_spent = False

    @property
    def live(self) -> bool:
        """Running and being polled (not crashed, not paused)."""
        return self.process is not None and self.paused is None

    def _tap(self, key: str, data: bytes | None) -> None:
        self.world.decoder.agent_wrote(self, key, data)

    def _listed_cancels(self, keys: list[str]) -> None:
        requests = frozenset(key[len(CANCELS) : -len(".json")] for key in keys)
        seen = CancelsSeen(
            self.world.next_seq(), self.world.now, self.name, self.incarnation, requests
        )
        self.world.trace.cancels_seen.append(seen)

    def _created(self, key: str, data: bytes, outcome: str) -> None:
        self.world.request_created(self, key, data, outcome)


class World:
    """One seeded run: ``run()`` plays its plan out; then its checkers judge it (``finish``)."""

    def __init__(
        self,
        plan: Plan,
        checkers: Sequence[Watcher],
        *,
        parts: PartsFactory | None = None,
        schedules: SchedulesFactory | None = None,
    ) -> None:
        self.plan = plan
        self.scenario = plan.scenario
        self.checkers = list(checkers)
        self.parts = parts or default_parts
        self.schedules = schedules or default_schedules
        self.now = 0.0
        self.seq = 0
        self.store = MemoryStorage.fresh("fdcore-simulator")
        # The world reads what agents write as they would: through the mailbox and the codec,
        # within the operator's bound on a file's size.
        bound = plan.agent_config("agent-1", self.store.url).max_file_bytes
        self.mailbox = Mailbox(self.store, max_file_bytes=bound)
        self.trace = Trace(poison=set(plan.poison))
        self.decoder = TraceDecoder(self)
        self.stats: Counter[str] = Counter()
        self.poll_operations: Counter[str] = Counter()  # the agents' store operations in polls
        self.agent_errors: list[tuple[float, str]] = []
        self.active: dict[str, StatusWrite] = {}  # latest status of unfinished requests
        self.finished = 0
        self._ended: set[str] = set()  # requests counted in ``finished``
        self.arrived = 0
        self.total = len(plan.arrivals)
        self.scheduled = 0  # schedule requests the agents created
        self.deadlines: dict[str, float] = {}  # schedule request -> deadline, virtual seconds
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0
        self.agents = [SimulatedAgent(self, agent_plan) for agent_plan in plan.agents]
        self.trace.skews = {agent.name: agent.skew for agent in self.agents}
        self.retention: RetentionProcess | None = None
        self._retention_run = 0  # the number of the run under way (its ticks carry it)
        self._kill_countdown: int | None = None  # its store calls left before it is killed
        if self.scenario.retention_runs:
            store = FaultyStore(
                self.store,
                self.decoder.retention_wrote,
                plan.retention_process.store,
                self.scenario.error_rate,
                self.scenario.ambiguous,
                0.0,
                lambda key, data, outcome: None,  # it creates no request
                VirtualClock(self, 0.0).now,  # the store's clock: true time
            )
            grace = self.scenario.grace_seconds
            self.retention = RetentionProcess(store, self.scenario.retention_runs_keep, grace)
            for agent in self.agents:
                agent.store.before = self._interleave

    # -- the event loop ----------------------------------------------------------------------

    def at(self, when: float, action: Callable[..., None], *args: Any) -> None:
        self._order += 1
        heapq.heappush(self._queue, (when, self._order, action, args))

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def run(self) -> World:
        """Play the plan out until every request is final or the time limit."""
        for arrival in self.plan.arrivals:
            self.at(arrival.time, self._arrive, arrival)
        for when, request in self.plan.cancels:
            self.at(when, self._cancel, request)
        for agent in self.agents:
            self.at(agent.plan.first_poll(), self._restart, agent)
            self._next_pause(agent, 0.0)
            self._next_starving(agent, 0.0)
        if self.retention is not None:
            self.at(self.plan.retention_process.next_run(), self._retention_start)
        # Nobody else froze objects: the run may freeze its own and thaw them all at its end.
        freeze = gc.isenabled() and gc.get_freeze_count() == 0
        try:
            self._play(self.scenario.time_limit, freeze)
        finally:
            if freeze:
                gc.unfreeze()  # a later full collection finds what became garbage meanwhile
            if self.retention is not None:
                self.retention.kill()  # its thread ends with the run
        return self

    def _play(self, limit: float, freeze: bool) -> None:
        """Take the actions in time order until every request is final or past ``limit``."""
        for done in itertools.count(1):
            if not self._queue or self._done():
                return
            when, _, action, args = heapq.heappop(self._queue)
            if when > limit:
                self.now = limit
                return
            self.now = when
            action(*args)
            if freeze and done % FREEZE_EVERY == 0:
                gc.collect(1)  # the young garbage first: what is frozen is never collected
                gc.freeze()

    def _done(self) -> bool:
        """Every request arrived and is final, and the schedules' period is over. A run with
        nothing to do and a time limit (``--requests 0 --max-hours H``) waits that long: what
        an idle fleet costs."""
        if not self.total + self.scheduled and self.scenario.max_hours is not None:
            return False
        return (
            self.arrived == self.total
            and self.finished == self.total + self.scheduled
            and self.now >= self.plan.schedule_until
        )

    # -- requests ------------------------------------------------------------------------------

    def _arrive(self, arrival: Arrival) -> None:
        submit(
            self.mailbox,
            arrival.entities,
            request_id=arrival.request,
            now=EPOCH + timedelta(seconds=self.now),
        )
        self.trace.created[arrival.request] = self.now
        self.trace.max_attempts[arrival.request] = self.scenario.max_attempts
        self.arrived += 1

    def _cancel(self, request: str) -> None:
        """An operator's ``fdcore cancel``: its writes go to the store directly, as submits do."""
        now = EPOCH + timedelta(seconds=self.now)
        try:
            done = cancel_request(self.mailbox, request, by="operator", reason=None, now=now)
        except RequestError:  # it ended first, or was archived: the command refuses
            self.stats["cancels refused"] += 1
            return
        seq = self.next_seq()
        self.trace.cancels[request] = seq
        self.stats["cancels"] += 1
        before = self.trace.latest.get(request)
        ended = done.status is not None and done.status.state is State.CANCELLED
        if ended and (before is None or not before.final):
            # Nobody held it: the command itself ended it (an agent's write would be tapped).
            assert done.status is not None
            self.decoder.status(None, seq, done.status)

    def request_created(self, agent: SimulatedAgent, key: str, data: bytes, outcome: str) -> None:
        """An agent tried to create a request: a schedule's (the world submits the others)."""
        made = self.mailbox.decode(Request, key, data)
        request = made.id
        create = ScheduleCreate(
            seq=self.next_seq(),
            time=self.now,
            agent=agent.name,
            incarnation=agent.incarnation,
            clock=agent.clock.now(),
            request=key[len("requests/") : -len(".json")],
            schedule=made.schedule.id if made.schedule else None,
            slot=made.schedule.slot if made.schedule else None,
            created_at=made.created_at,
            deadline=made.deadline,
            entities=tuple(made.entities),
            outcome=outcome,
        )
        self.trace.schedule_creates.append(create)
        if not create.landed:
            return
        self.scheduled += 1
        self.trace.created[request] = self.now
        self.trace.max_attempts[request] = self.scenario.max_attempts
        if create.deadline is not None:
            self.deadlines[request] = seconds(create.deadline)
        if made.affinity:
            self.trace.affinity[request] = made.affinity
        self.trace.schedule_writes[request] += 1

    def status_landed(self, write: StatusWrite) -> None:
        """A status write landed (the decoder traced it): the run's progress moves with it."""
        request = write.request
        if not write.final:
            self.active[request] = write
            return
        self.active.pop(request, None)
        if request not in self._ended:
            self._ended.add(request)
            self.finished += 1
            if self.scenario.archive_after and not self.scenario.retention_keep:
                self.at(self._archive_time(request), self._archive, request)

    def _archive_time(self, request: str) -> float:
        """When the retention job removes a finished request: ``archive_after`` later, and for a
        schedule's request not before its slot's deadline has passed on every agent's clock,
        or an agent restarted inside the slot's window would create the slot's request again."""
        when = self.now + self.scenario.archive_after
        deadline = self.deadlines.get(request)
        if deadline is not None:
            when = max(when, deadline + self.plan.widest_skew + 1)
        return when

    def _archive(self, request: str) -> None:
        """The retention job: a finished request leaves the folders agents list every poll."""
        for key in (request_key(request), status_key(request), cancel_key(request)):
            with contextlib.suppress(NotFound):
                self.store.delete(key)

    # -- the retention process (``--retention-runs``) ----------------------------------------------

    def _retention_start(self) -> None:
        retention = self.retention
        assert retention is not None
        retention.start(EPOCH + timedelta(seconds=self.now))
        self._retention_run += 1
        self._kill_countdown = self.plan.retention_process.kill_after()
        self.stats["retention runs"] += 1
        self._retention_tick(self._retention_run)

    def _retention_tick(self, run: int) -> None:
        """The run's own pace between the world's events: one store call a step."""
        if run != self._retention_run:
            return
        self._retention_call()
        if self.retention is not None and self.retention.running:
            self.at(self.now + RetentionPlan.STEP, self._retention_tick, run)

    def _interleave(self) -> None:
        """Before an agent's store call: as the plan says, some of the run's calls land first."""
        retention = self.retention
        if retention is None or not retention.running:
            return
        for _ in range(self.plan.retention_process.calls_before()):
            self._retention_call()

    def _retention_call(self) -> None:
        """One store call of the run under way, or the SIGKILL the plan has for it."""
        retention = self.retention
        if retention is None or not retention.running:
            return
        if self._kill_countdown == 0:
            retention.kill()
            self.stats["retention runs killed"] += 1
        else:
            if self._kill_countdown is not None:
                self._kill_countdown -= 1
            retention.step()
        if not retention.running:
            self.at(self.now + self.plan.retention_process.next_run(), self._retention_start)

    # -- agents: start, poll, crash, pause -------------------------------------------------------

    def _restart(self, agent: SimulatedAgent) -> None:
        """Start (or restart after a crash) the agent's process: a new Agent, same name."""
        agent.incarnation += 1
        agent.polls = 0
        agent.busy_until = 0.0  # a new process: the old one's store calls died with it
        agent.waited = False
        config = self.plan.agent_config(agent.name, self.store.url)
        self.trace.starts.append(Start(self.next_seq(), self.now, agent.name, agent.incarnation))

        def start_table(job: TableJob) -> TableRun:
            return self._start_table(agent, job)

        # Counted as the runtime counts an agent process's calls: what its records say it cost
        store = CountingStore(agent.store)
        parts = self.parts(config, store, start_table)
        agent.process = Agent(
            config,
            Mailbox(store, ProblemLog(agent.name)),
            attrs.evolve(parts, claim=WatchedClaim(parts.claim, agent)),
            agent.clock,
            instance=f"{agent.name}.{agent.incarnation}",
            previous_process_gone=lambda record: True,  # the simulator killed it
            contain_errors=False,  # a bug must fail the simulation that found it
            schedules=self.schedules(config),  # a new process: it remembers no slot
        )
        self._poll_chain(agent, self.now)
        crash_after = agent.plan.crash_after()
        if crash_after is not None:
            self.at(self.now + crash_after, self._crash_fault, agent, agent.incarnation)
        for checker in self.checkers:
            checker.after_change(self)

    def _poll_chain(self, agent: SimulatedAgent, when: float) -> None:
        agent.poll_token += 1
        self.at(when, self._poll, agent, agent.poll_token)

    def _poll(self, agent: SimulatedAgent, token: int) -> None:
        process = agent.process
        if token != agent.poll_token or process is None or agent.paused is not None:
            return
        if self.now < agent.busy_until:  # still in a reaction's store calls: one thread
            self.at(agent.busy_until, self._poll, agent, token)
            return
        if self._waits_for_cpu(agent):
            self.at(agent.busy_until, self._poll, agent, token)
            return
        store = agent.store
        store.begin_poll()
        operations_before = dict(store.operations)
        free_before = process.components.claim.may_claim(process.load())
        stale_held = self._stale_held(agent.name, process)
        held_before = bool(process.held)
        seq_start = self.next_seq()
        failure: Exception | None = None
        agent.polling, agent.claimed, agent.room_spent = True, False, False
        try:
            process.poll()
        except Exception as exc:  # the process must never raise out of a poll: report it
            failure = exc
        agent.polling = False
        elapsed = store.latency_spent  # what the poll's store calls took: delays the next one
        agent.busy_until = self.now + elapsed
        self.trace.polls.append(
            PollRecord(
                seq_start=seq_start,
                seq_end=self.next_seq(),
                time=self.now,
                agent=agent.name,
                incarnation=agent.incarnation,
                first=agent.polls == 0,
                clock=self.now + agent.skew,
                errors=store.poll_errors,
                free_before=free_before,
                room_spent=agent.room_spent,
                lost_status_writes=tuple(store.lost_status_writes),
                stale_held=stale_held,
                held_before=held_before,
            )
        )
        agent.polls += 1
        self.stats["polls"] += 1
        for kind, count in store.operations.items():
            self.poll_operations[kind] += count - operations_before.get(kind, 0)
        if failure is not None:
            self.agent_errors.append(
                (self.now, f"{agent.name} raised {type(failure).__name__}: {failure}")
            )
            self._crash(agent, "exception")
            return
        for checker in self.checkers:
            checker.after_poll(self, agent)
        self.at(self.now + elapsed + agent.plan.poll_interval(), self._poll, agent, token)
        self._wake_when_due(agent)

    def _react(self, agent: SimulatedAgent, incarnation: int, due: float | None = None) -> None:
        """What the runtime does between polls (:meth:`Agent.react`): a run ended, a slot is due.

        Atomic in virtual time like a poll; the store latency it meets keeps the process busy, as
        the runtime's one thread is: a poll or reaction falling due meanwhile waits for it.
        """
        if due is not None and agent.due_wake == due:
            agent.due_wake = None
        process = agent.process
        if process is None or agent.incarnation != incarnation or agent.paused is not None:
            return
        if self.now < agent.busy_until:  # the process's one thread is still in its last step
            self.at(agent.busy_until, self._react, agent, incarnation)
            return
        if self._waits_for_cpu(agent):
            self.at(agent.busy_until, self._react, agent, incarnation)
            return
        agent.store.begin_poll()
        try:
            process.react()
        except Exception as exc:  # the process must never raise out of a step: report it
            self.agent_errors.append((self.now, f"{agent.name} raised {type(exc).__name__}: {exc}"))
            self._crash(agent, "exception")
            return
        self.stats["reactions"] += 1
        agent.busy_until = self.now + agent.store.latency_spent
        for checker in self.checkers:
            checker.after_reaction(self, agent)
        self._wake_when_due(agent)

    def _wake_when_due(self, agent: SimulatedAgent) -> None:
        """Have the process react at its schedules' next due slot, as the runtime wakes it."""
        process = agent.process
        if process is None:
            return
        due = process.next_due(agent.clock.now())
        if due is None:
            return
        # The process's clock runs ``skew`` ahead of the world's: its due time comes that early.
        when = (due - EPOCH).total_seconds() - agent.skew + DUE_MARGIN
        if agent.due_wake != when:
            agent.due_wake = when
            self.at(max(when, self.now), self._react, agent, agent.incarnation, when)

    def _stale_held(self, name: str, process: Agent) -> tuple[str, ...]:
        """Requests the process holds in memory whose status names another process or attempt."""
        latest = self.trace.latest
        return tuple(
            request
            for request, work in process.held.items()
            if (status := latest.get(request)) is not None
            and (status.agent != name or status.attempt != work.status.attempt)
        )

    def _crash_fault(self, agent: SimulatedAgent, incarnation: int) -> None:
        if agent.process is not None and agent.incarnation == incarnation:
            self._crash(agent, "fault")

    def _crash(self, agent: SimulatedAgent, cause: str) -> None:
        """Drop the agent's process mid-work: its runs die with it; restart it later."""
        if agent.process is None:
            return
        held = self._held_in_store(agent)
        for run in agent.runs.values():
            run.state = "died"
            run.version += 1
        self.stats["runs died"] += len(agent.runs)
        agent.runs.clear()
        agent.process = None
        agent.paused = None
        agent.poll_token += 1
        self.trace.crashes.append(
            Crash(self.next_seq(), self.now, agent.name, agent.incarnation, cause, held)
        )
        self.stats[f"crashes ({cause})"] += 1
        self.at(self.now + agent.plan.restart_after(), self._restart, agent)
        for checker in self.checkers:
            checker.after_change(self)

    def _held_in_store(self, agent: SimulatedAgent) -> tuple[tuple[str, int], ...]:
        """(request, attempt) of every unfinished request whose status names the agent."""
        return tuple(
            (request, write.attempt)
            for request, write in self.active.items()
            if write.agent == agent.name
        )

    def _waits_for_cpu(self, agent: SimulatedAgent) -> bool:
        """In a spell of CPU starvation, a step waits a while before it runs (once: True, and
        the agent is busy until then); its table runs go on meanwhile."""
        if agent.waited or self.now >= agent.starved_until:
            agent.waited = False
            return False
        agent.waited = True
        agent.busy_until = self.now + agent.plan.step_wait()
        self.stats["steps starved"] += 1
        return True

    def _next_starving(self, agent: SimulatedAgent, after: float) -> None:
        gap = agent.plan.starve_after()
        if gap is not None:
            self.at(after + gap, self._starve, agent)

    def _starve(self, agent: SimulatedAgent) -> None:
        """A spell of CPU starvation begins (a host saturated by other work): the agent lives
        on, but each of its steps comes late."""
        agent.starved_until = self.now + agent.plan.starve_length()
        self.stats["starvation spells"] += 1
        self._next_starving(agent, agent.starved_until)

    def _next_pause(self, agent: SimulatedAgent, after: float) -> None:
        gap = agent.plan.pause_after()
        if gap is not None:
            self.at(after + gap, self._pause, agent)

    def _pause(self, agent: SimulatedAgent) -> None:
        """Stop polling the agent (and freeze its runs) for a while: a stopped VM, a GC storm."""
        if not agent.live:
            self._next_pause(agent, self.now)
            return
        pause = Pause(
            self.next_seq(),
            self.now,
            self.now + agent.plan.pause_length(),
            agent.name,
            agent.incarnation,
            self._held_in_store(agent),
        )
        agent.paused = pause
        self.trace.pauses.append(pause)
        self.stats["pauses"] += 1
        for run in agent.runs.values():
            run.remaining = run.end - self.now
            run.version += 1
        self.at(pause.end, self._resume, agent, pause)
        for checker in self.checkers:
            checker.after_change(self)

    def _resume(self, agent: SimulatedAgent, pause: Pause) -> None:
        if agent.paused is not pause:
            return  # it crashed while paused
        agent.paused = None
        pause.resume_seq = self.next_seq()
        for run in agent.runs.values():
            run.end = self.now + run.remaining
            self.at(run.end, self._end_run, run, run.version)
        self._poll_chain(agent, self.now)
        self._next_pause(agent, self.now)
        for checker in self.checkers:
            checker.after_change(self)

    # -- table runs ------------------------------------------------------------------------------

    def _start_table(self, agent: SimulatedAgent, job: TableJob) -> SimRun:
        duration = self.plan.table_seconds(job.request, job.table) / agent.speed
        run = SimRun(agent, job, self.now, self.now + duration)
        status = self.trace.latest.get(job.request)
        self.trace.table_starts.append(
            TableStart(
                seq=self.next_seq(),
                time=self.now,
                agent=agent.name,
                incarnation=agent.incarnation,
                request=job.request,
                table=job.table,
                attempt=job.attempt,
                recorded_done=status is not None and job.table in status.tables_done,
            )
        )
        agent.runs[id(run)] = run
        self.trace.first_start.setdefault(job.request, self.now)
        self.stats["runs started"] += 1
        if job.request in self.trace.poison:
            run.end = self.now + duration * agent.plan.poison_share()
        self.at(run.end, self._end_run, run, run.version)
        return run

    def _end_run(self, run: SimRun, version: int) -> None:
        if run.version != version or run.state != "running":
            return
        agent = run.agent
        job = run.job
        if job.request in self.trace.poison:
            self._crash(agent, "poison")  # the table takes its agent down with it
            return
        lease = self.trace.leases.get(job.table)
        payload = {"request": job.request, "agent": job.agent, "attempt": job.attempt}
        try:
            fenced_write(
                self.store, MailboxLeases(self.store), job.table, job.fencing_token, payload
            )
            run.result = TableResult(True)
            accepted = True
        except StaleFencingToken as exc:
            run.result = TableResult(False, str(exc))
            accepted = False
        self.stats["table writes landed" if accepted else "table writes rejected"] += 1
        self.trace.table_writes.append(
            TableWrite(
                seq=self.next_seq(),
                time=self.now,
                table=job.table,
                token=job.fencing_token,
                agent=agent.name,
                incarnation=run.incarnation,
                request=job.request,
                attempt=job.attempt,
                run_started=run.started,
                accepted=accepted,
                lease_generation=lease.generation if lease else None,
                lease_holder=lease.holder if lease else None,
                lease_request=lease.request if lease else None,
            )
        )
        run.state = "ended"
        agent.runs.pop(id(run), None)
        # The runtime wakes its agent when a run ends: record it and move on at once.
        self.at(self.now, self._react, agent, run.incarnation)
