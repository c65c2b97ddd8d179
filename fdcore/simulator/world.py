"""The seeded discrete-event world: real agents, one virtual clock, one in-memory store.

Each agent is a real :class:`fdcore.agent.Agent`, unchanged, built the way the runtime builds
one (:func:`fdcore.runtime.build_components`), with three things swapped for simulated ones:

* its clock is a view of the world's virtual clock, off by the agent's skew;
* its storage is a :class:`~fdcore.simulator.store.FaultyStore` over the shared in-memory store;
* its table runner starts :class:`SimRun` objects that end at a seeded virtual time and then
  write the table through :func:`fdcore.fencing.fenced_write`, as a real table would.

Events (agent polls, run ends, request arrivals, crashes, restarts, pauses, resumes) sit in one
heap ordered by (virtual time, sequence number), so a seed fixes the whole run. A poll is atomic
in virtual time: the store latency it met only delays that agent's next poll. Agents given
schedules (:mod:`fdcore.simulator.schedules`) create those requests themselves, in their polls.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from fdcore.abc import AgentLoad, ClaimPolicy, Storage, TableJob, TableResult, TableRun
from fdcore.agent.components import Components, StartTable, build_components
from fdcore.agent.core import Agent
from fdcore.agent.schedules import Schedule, build_schedules
from fdcore.agent.settings import AgentConfig
from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.codec import parse_time
from fdcore.contract.layout import agent_key, request_key, status_key
from fdcore.errors import NotFound, StaleFencingToken
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.mailbox.fencing import fenced_write
from fdcore.mailbox.submit import submit
from fdcore.simulator.scenario import EPOCH, Scenario
from fdcore.simulator.schedules import installed_plugins, plan_schedules, table_names
from fdcore.simulator.store import FaultyStore
from fdcore.simulator.trace import (
    Crash,
    LeaseState,
    LeaseTaken,
    Pause,
    PollRecord,
    RunLogWrite,
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


def default_parts(config: AgentConfig, storage: Storage, start_table: StartTable) -> Components:
    """The parts the agent's config names, resolved through the installed plugins."""
    return build_components(config, installed_plugins(), storage, start_table)


def default_schedules(config: AgentConfig) -> list[Schedule]:
    """The agent's schedules with the installed slot functions, as the runtime builds them."""
    return build_schedules(config, installed_plugins())


class VirtualClock:
    """An agent's view of the world's clock: virtual time plus the agent's skew.

    It stands still within a poll: a poll is atomic, so its writes land at the time it read.
    The time its store calls took delays the agent's next poll instead.
    """

    def __init__(self, world: World, skew: float) -> None:
        self.world = world
        self.skew = skew

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.world.now + self.skew)


class SimRun:
    """A simulated table run: ends at a virtual time, then writes its table fenced."""

    def __init__(self, slot: AgentSlot, job: TableJob, started: float, end: float) -> None:
        self.slot = slot
        self.job = job
        self.incarnation = slot.incarnation
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
            self.slot.runs.pop(id(self), None)
            self.slot.world.stats["runs cancelled"] += 1


class WatchedClaim:
    """The agent's claim policy, noting a "no" inside a poll before the poll's first claim.

    The sweep for requests under way (taken over, or the agent's own whose answers were lost)
    comes before claims: a "no" then means the poll's room went to such requests.
    """

    def __init__(self, inner: ClaimPolicy, slot: AgentSlot) -> None:
        self.inner = inner
        self.name = inner.name
        self.slot = slot

    def may_claim(self, load: AgentLoad) -> bool:
        allowed = self.inner.may_claim(load)
        slot = self.slot
        if not allowed and slot.polling and not slot.claimed:
            slot.room_spent = True
        return allowed


class AgentSlot:
    """One agent name: its machine (skew, store view, random streams) and current process."""

    def __init__(self, world: World, name: str) -> None:
        seed = world.scenario.seed
        self.world = world
        self.name = name
        self.skew = random.Random(f"{seed}:skew:{name}").uniform(
            -world.scenario.skew, world.scenario.skew
        )
        self.skew = dict(world.scenario.agent_skews).get(name, self.skew)
        self.rng = random.Random(f"{seed}:agent:{name}")  # poll jitter and latency
        self.faults = random.Random(f"{seed}:faults:{name}")  # crash and pause times
        self.store = FaultyStore(
            world.store,
            self._tap,
            random.Random(f"{seed}:store:{name}"),
            world.scenario.error_rate,
            world.scenario.ambiguous,
            world.scenario.latency,
            self._created,
        )
        self.clock = VirtualClock(world, self.skew)
        self.record_key = agent_key(name)
        self.agent: Agent | None = None
        self.incarnation = 0
        self.polls = 0  # in this incarnation
        self.paused: Pause | None = None
        self.poll_token = 0  # a new poll chain voids the old one
        self.runs: dict[int, SimRun] = {}  # running table runs (insertion order: deterministic)
        # within the current poll: a new request claimed; the claim policy said no before it
        self.polling = self.claimed = self.room_spent = False

    @property
    def live(self) -> bool:
        """Running and being polled (not crashed, not paused)."""
        return self.agent is not None and self.paused is None

    def _tap(self, key: str, data: bytes | None) -> None:
        self.world.tap(self, key, data)

    def _created(self, key: str, data: bytes, outcome: str) -> None:
        self.world.request_created(self, key, data, outcome)


class World:
    """One seeded run: ``run()`` plays it out and checks it; ``build_report`` reads it."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        checkers: Sequence[Any] | None = None,
        parts: PartsFactory | None = None,
        schedules: SchedulesFactory | None = None,
    ) -> None:
        from fdcore.simulator.invariants import default_checkers

        self.scenario = scenario
        self.parts = parts or default_parts
        self.schedules = schedules or default_schedules
        self.plan = plan_schedules(scenario, installed_plugins())
        self.checkers = list(checkers) if checkers is not None else default_checkers(scenario)
        self.now = 0.0
        self.seq = 0
        self.store = MemoryStorage.fresh("fdcore-simulator")
        self.trace = Trace()
        self.stats: Counter[str] = Counter()
        self.agent_errors: list[tuple[float, str]] = []
        self.active: dict[str, StatusWrite] = {}  # latest status of unfinished requests
        self.finished = 0
        self.arrived = 0
        self.total = scenario.requests + scenario.poison
        self.scheduled = 0  # schedule requests the agents created
        self.deadlines: dict[str, float] = {}  # schedule request -> deadline, virtual seconds
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0
        self.durations: dict[str, dict[str, float]] = {}
        self.slots = [AgentSlot(self, f"agent-{n + 1}") for n in range(scenario.agents)]
        self.trace.skews = {slot.name: slot.skew for slot in self.slots}
        # Schedules run this long: past the judged period by the widest clock skew, so every
        # judged slot's window is over on every agent's clock.
        self.schedule_until = 0.0
        if self.plan:
            widest = max(abs(slot.skew) for slot in self.slots)
            self.schedule_until = scenario.schedule_hours * 3600 + widest
        self.wall_seconds = 0.0

    # -- the event loop ----------------------------------------------------------------------

    def at(self, when: float, action: Callable[..., None], *args: Any) -> None:
        self._order += 1
        heapq.heappush(self._queue, (when, self._order, action, args))

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def run(self) -> World:
        """Simulate until every request is final or the time limit; then run the checkers."""
        began = time.perf_counter()
        self._plan_requests()
        s = self.scenario
        for slot in self.slots:
            self.at(slot.rng.uniform(0, s.poll_seconds), self._restart, slot)
            if s.pause_rate:
                self._plan_pause(slot, 0.0)
        limit = s.time_limit
        while self._queue and not self._done():
            when, _, action, args = heapq.heappop(self._queue)
            if when > limit:
                self.now = limit
                break
            self.now = when
            action(*args)
        self.violations = [v for checker in self.checkers for v in checker.finish(self)]
        self.wall_seconds = time.perf_counter() - began
        return self

    def _done(self) -> bool:
        """Every request arrived and is final, and the schedules' period is over."""
        return (
            self.arrived == self.total
            and self.finished == self.total + self.scheduled
            and self.now >= self.schedule_until
        )

    # -- requests ------------------------------------------------------------------------------

    def _plan_requests(self) -> None:
        s = self.scenario
        rng = random.Random(f"{s.seed}:workload")
        tables = table_names(s.table_pool)
        mu = math.log(s.table_median)
        when = 0.0
        plan: list[tuple[float, str, bool]] = []
        for n in range(s.requests):
            if s.arrival == "poisson":
                when += rng.expovariate(s.arrival_rate)
            plan.append((when, f"r{n + 1:06d}", False))
        span = when
        for n in range(s.poison):
            plan.append((rng.uniform(0, span), f"poison-{n + 1:03d}", True))
        for when, request, poison in plan:
            count = 1 if poison else rng.randint(1, s.max_tables)
            entities = rng.sample(tables, count)
            self.durations[request] = {
                table: rng.lognormvariate(mu, s.table_sigma) for table in entities
            }
            if poison:
                self.trace.poison.add(request)
            self.at(when, self._arrive, request, entities)

    def _arrive(self, request: str, entities: list[str]) -> None:
        submit(
            Mailbox(self.store),
            entities,
            request_id=request,
            now=EPOCH + timedelta(seconds=self.now),
        )
        self.trace.created[request] = self.now
        self.trace.max_attempts[request] = self.scenario.max_attempts
        self.arrived += 1

    def request_created(self, slot: AgentSlot, key: str, data: bytes, outcome: str) -> None:
        """An agent tried to create a request: a schedule's (the world submits the others)."""
        doc: dict[str, Any] = json.loads(data)
        request = doc["id"]
        schedule = doc.get("schedule") or {}
        deadline = doc.get("deadline")
        create = ScheduleCreate(
            seq=self.next_seq(),
            time=self.now,
            agent=slot.name,
            incarnation=slot.incarnation,
            clock=slot.clock.now(),
            request=key[len("requests/") : -len(".json")],
            schedule=schedule.get("id"),
            slot=schedule.get("slot"),
            created_at=parse_time(doc["created_at"]),
            deadline=parse_time(deadline) if deadline else None,
            entities=tuple(doc["entities"]),
            outcome=outcome,
        )
        self.trace.schedule_creates.append(create)
        if not create.landed:
            return
        self.scheduled += 1
        self.trace.created[request] = self.now
        self.trace.max_attempts[request] = self.scenario.max_attempts
        if create.deadline is not None:
            self.deadlines[request] = (create.deadline - EPOCH).total_seconds()
        if doc.get("affinity"):
            self.trace.affinity[request] = doc["affinity"]
        self.trace.schedule_writes[request] += 1

    def _table_seconds(self, request: str, table: str) -> float:
        """A table's run time: drawn up front for submitted requests; for a schedule's request
        drawn from its id, so it does not depend on which agent created it."""
        planned = self.durations.get(request)
        if planned is not None:
            return planned[table]
        s = self.scenario
        rng = random.Random(f"{s.seed}:table:{request}:{table}")
        return rng.lognormvariate(math.log(s.table_median), s.table_sigma)

    def _archive_time(self, request: str) -> float:
        """When the retention job removes a finished request: ``archive_after`` later, and for a
        schedule's request not before its slot's deadline has passed on every agent's clock,
        or an agent restarted inside the slot's window would create the slot's request again."""
        when = self.now + self.scenario.archive_after
        deadline = self.deadlines.get(request)
        if deadline is not None:
            widest = max(abs(skew) for skew in self.trace.skews.values())
            when = max(when, deadline + widest + 1)
        return when

    def _archive(self, request: str) -> None:
        """The retention job: a finished request leaves the folders agents list every poll."""
        for key in (request_key(request), status_key(request)):
            with contextlib.suppress(NotFound):
                self.store.delete(key)

    # -- agents: start, poll, crash, pause -------------------------------------------------------

    def _config(self, name: str) -> AgentConfig:
        s = self.scenario
        return AgentConfig(
            name=name,
            environment=self.store.url,
            poll_seconds=s.poll_seconds,
            stale_after=s.stale_after,
            concurrency=s.concurrency,
            claim=s.claim,
            take_over=s.take_over,
            grace_seconds=s.grace_seconds,
            max_attempts=s.max_attempts,
            runner="python",
            schedules=tuple(p.config for p in self.plan if p.given_to(name)),
            source="<simulator>",
        )

    def _restart(self, slot: AgentSlot) -> None:
        """Start (or restart after a crash) the agent's process: a new Agent, same name."""
        slot.incarnation += 1
        slot.polls = 0
        config = self._config(slot.name)
        self.trace.starts.append(Start(self.next_seq(), self.now, slot.name, slot.incarnation))

        def start_table(job: TableJob) -> TableRun:
            return self._start_table(slot, job)

        parts = self.parts(config, slot.store, start_table)
        slot.agent = Agent(
            config,
            Mailbox(slot.store, ProblemLog(slot.name)),
            attrs.evolve(parts, claim=WatchedClaim(parts.claim, slot)),
            slot.clock,
            instance=f"{slot.name}.{slot.incarnation}",
            previous_process_gone=lambda record: True,  # the simulator killed it
            schedules=self.schedules(config),  # a new process: it remembers no slot
        )
        self._poll_chain(slot, self.now)
        if self.scenario.crash_rate:
            gap = slot.faults.expovariate(self.scenario.crash_rate / 3600)
            self.at(self.now + gap, self._crash_fault, slot, slot.incarnation)
        for checker in self.checkers:
            checker.after_change(self)

    def _poll_chain(self, slot: AgentSlot, when: float) -> None:
        slot.poll_token += 1
        self.at(when, self._poll, slot, slot.poll_token)

    def _poll(self, slot: AgentSlot, token: int) -> None:
        agent = slot.agent
        if token != slot.poll_token or agent is None or slot.paused is not None:
            return
        s = self.scenario
        store = slot.store
        store.begin_poll()
        free_before = agent.parts.claim.may_claim(agent.load())
        stale_held = self._stale_held(slot.name, agent)
        seq_start = self.next_seq()
        failure: Exception | None = None
        slot.polling, slot.claimed, slot.room_spent = True, False, False
        try:
            agent.poll()
        except Exception as exc:  # the agent must never raise out of a poll: report it
            failure = exc
        slot.polling = False
        elapsed = store.poll_seconds  # what the poll's store calls took: delays the next one
        self.trace.polls.append(
            PollRecord(
                seq_start=seq_start,
                seq_end=self.next_seq(),
                time=self.now,
                agent=slot.name,
                incarnation=slot.incarnation,
                first=slot.polls == 0,
                clock=self.now + slot.skew,
                errors=store.poll_errors,
                free_before=free_before,
                room_spent=slot.room_spent,
                lost_status_writes=tuple(store.lost_status_writes),
                stale_held=stale_held,
            )
        )
        slot.polls += 1
        self.stats["polls"] += 1
        if failure is not None:
            self.agent_errors.append(
                (self.now, f"{slot.name} raised {type(failure).__name__}: {failure}")
            )
            self._crash(slot, "exception")
            return
        for checker in self.checkers:
            checker.after_poll(self, slot)
        interval = s.poll_seconds * slot.rng.uniform(1 - s.poll_jitter, 1 + s.poll_jitter)
        self.at(self.now + elapsed + interval, self._poll, slot, token)

    def _stale_held(self, name: str, agent: Agent) -> tuple[str, ...]:
        """Requests the agent holds in memory whose status names another agent or attempt."""
        latest = self.trace.latest
        return tuple(
            request
            for request, work in agent.held.items()
            if (status := latest.get(request)) is not None
            and (status.agent != name or status.attempt != work.status.attempt)
        )

    def _crash_fault(self, slot: AgentSlot, incarnation: int) -> None:
        if slot.agent is not None and slot.incarnation == incarnation:
            self._crash(slot, "fault")

    def _crash(self, slot: AgentSlot, cause: str) -> None:
        """Drop the agent's process mid-work: its runs die with it; restart it later."""
        if slot.agent is None:
            return
        held = self._held_in_store(slot)
        for run in slot.runs.values():
            run.state = "died"
            run.version += 1
        self.stats["runs died"] += len(slot.runs)
        slot.runs.clear()
        slot.agent = None
        slot.paused = None
        slot.poll_token += 1
        self.trace.crashes.append(
            Crash(self.next_seq(), self.now, slot.name, slot.incarnation, cause, held)
        )
        self.stats[f"crashes ({cause})"] += 1
        s = self.scenario
        longest = s.restart_after if s.restart_after is not None else 2 * s.takeover_seconds
        self.at(
            self.now + slot.faults.uniform(s.poll_seconds, max(longest, s.poll_seconds)),
            self._restart,
            slot,
        )
        for checker in self.checkers:
            checker.after_change(self)

    def _held_in_store(self, slot: AgentSlot) -> tuple[tuple[str, int], ...]:
        """(request, attempt) of every unfinished request whose status names the agent."""
        return tuple(
            (request, write.attempt)
            for request, write in self.active.items()
            if write.agent == slot.name
        )

    def _plan_pause(self, slot: AgentSlot, after: float) -> None:
        gap = slot.faults.expovariate(self.scenario.pause_rate / 3600)
        self.at(after + gap, self._pause, slot)

    def _pause(self, slot: AgentSlot) -> None:
        """Stop polling the agent (and freeze its runs) for a while: a stopped VM, a GC storm."""
        if not slot.live:
            self._plan_pause(slot, self.now)
            return
        s = self.scenario
        longest = s.pause_max if s.pause_max is not None else 3 * s.takeover_seconds
        if slot.faults.random() < 0.5:  # half short (under stale_after), half long
            length = slot.faults.uniform(s.poll_seconds, min(s.stale_after, longest))
        else:
            length = slot.faults.uniform(min(s.takeover_seconds, longest), longest)
        pause = Pause(
            self.next_seq(),
            self.now,
            self.now + length,
            slot.name,
            slot.incarnation,
            self._held_in_store(slot),
        )
        slot.paused = pause
        self.trace.pauses.append(pause)
        self.stats["pauses"] += 1
        for run in slot.runs.values():
            run.remaining = run.end - self.now
            run.version += 1
        self.at(pause.end, self._resume, slot, pause)
        for checker in self.checkers:
            checker.after_change(self)

    def _resume(self, slot: AgentSlot, pause: Pause) -> None:
        if slot.paused is not pause:
            return  # it crashed while paused
        slot.paused = None
        pause.resume_seq = self.next_seq()
        for run in slot.runs.values():
            run.end = self.now + run.remaining
            self.at(run.end, self._end_run, run, run.version)
        self._poll_chain(slot, self.now)
        self._plan_pause(slot, self.now)
        for checker in self.checkers:
            checker.after_change(self)

    # -- table runs ------------------------------------------------------------------------------

    def _start_table(self, slot: AgentSlot, job: TableJob) -> SimRun:
        duration = self._table_seconds(job.request, job.table)
        run = SimRun(slot, job, self.now, self.now + duration)
        status = self.trace.latest.get(job.request)
        self.trace.table_starts.append(
            TableStart(
                seq=self.next_seq(),
                time=self.now,
                agent=slot.name,
                incarnation=slot.incarnation,
                request=job.request,
                table=job.table,
                attempt=job.attempt,
                recorded_done=status is not None and job.table in status.tables_done,
            )
        )
        slot.runs[id(run)] = run
        self.trace.first_start.setdefault(job.request, self.now)
        self.stats["runs started"] += 1
        if job.request in self.trace.poison:
            run.end = self.now + duration * slot.faults.uniform(0.1, 0.9)
        self.at(run.end, self._end_run, run, run.version)
        return run

    def _end_run(self, run: SimRun, version: int) -> None:
        if run.version != version or run.state != "running":
            return
        slot = run.slot
        job = run.job
        if job.request in self.trace.poison:
            self._crash(slot, "poison")  # the table takes its agent down with it
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
                agent=slot.name,
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
        slot.runs.pop(id(run), None)

    # -- the trace -------------------------------------------------------------------------------

    def tap(self, slot: AgentSlot, key: str, data: bytes | None) -> None:
        """A write by ``slot``'s agent landed (``data`` None: a delete): keep what checkers need."""
        seq = self.next_seq()
        if data is None:
            if key.startswith("status/"):
                self.agent_errors.append((self.now, f"{slot.name} deleted {key}"))
            return
        if key.startswith("agents/"):
            # Every poll writes one: the key says whose it is, no need to decode it.
            if key == slot.record_key:
                beats = self.trace.heartbeats.setdefault((slot.name, slot.incarnation), [])
                beats.append((seq, self.now))
                writes = self.trace.record_writes.setdefault(slot.name, [])
                writes.append((seq, self.now, self.now + slot.skew))
            return
        if key.startswith("requests/"):
            return  # a schedule's request: see request_created
        doc: dict[str, Any] = json.loads(data)
        if doc.get("request", "").startswith("sched-"):
            self.trace.schedule_writes[doc["request"]] += 1
        if key.startswith("status/"):
            self._tap_status(slot, seq, doc)
        elif key.startswith("leases/"):
            self._tap_lease(slot, seq, doc)
        elif key.startswith("runs/"):
            lease = self.trace.leases.get(doc["table"])
            self.trace.run_log.append(
                RunLogWrite(
                    seq=seq,
                    time=self.now,
                    writer=slot.name,
                    incarnation=slot.incarnation,
                    request=doc["request"],
                    table=doc["table"],
                    attempt=doc["attempt"],
                    generation=doc["generation"],
                    lease_generation=lease.generation if lease else None,
                    outcome=doc["outcome"],
                )
            )

    def _tap_status(self, slot: AgentSlot, seq: int, doc: dict[str, Any]) -> None:
        request = doc["request"]
        write = StatusWrite(
            seq=seq,
            time=self.now,
            writer=slot.name,
            incarnation=slot.incarnation,
            request=request,
            state=doc["state"],
            agent=doc.get("agent"),
            attempt=doc.get("attempt", 1),
            attempts=tuple(
                (a["number"], a["agent"], a.get("outcome", "running"))
                for a in doc.get("attempts", [])
            ),
            message=doc.get("message"),
            tables_done=tuple(doc.get("tables_done", ())),
        )
        self.trace.status.setdefault(request, []).append(write)
        before = self.trace.latest.get(request)
        self.trace.latest[request] = write
        if before is None and write.agent == slot.name:
            slot.claimed = True
        if not write.final:
            self.active[request] = write
            return
        self.active.pop(request, None)
        if before is None or not before.final:
            self.finished += 1
            if self.scenario.archive_after:
                self.at(self._archive_time(request), self._archive, request)

    def _tap_lease(self, slot: AgentSlot, seq: int, doc: dict[str, Any]) -> None:
        table = doc["table"]
        lease = LeaseState(
            generation=doc["generation"],
            holder=doc["holder"],
            request=doc["request"],
            attempt=doc["attempt"],
            released=doc.get("released", False),
            expires_at=(parse_time(doc["expires_at"]) - EPOCH).total_seconds(),
            incarnation=slot.incarnation,
        )
        before = self.trace.leases.get(table)
        if before and not before.released and before.holder != lease.holder:
            clock = self.now + self.trace.skews[before.holder]
            self.trace.leases_taken.append(LeaseTaken(seq, self.now, table, before, lease, clock))
        self.trace.leases[table] = lease
