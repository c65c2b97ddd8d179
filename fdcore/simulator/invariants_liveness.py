"""The liveness checkers: takeover in time and never from a live agent, heartbeats in time, an
agent's own attempts kept, a paused agent stopped, a lost request failed.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from fdcore.agent.skew import MEASUREMENT_ERROR, SKEW_RESOLUTION
from fdcore.contract.limits import HEARTBEAT_SHARE, IDLE_HEARTBEAT_SHARE
from fdcore.simulator.invariants import Checker, Violation, attempt_of, who
from fdcore.simulator.scenario import Scenario
from fdcore.simulator.trace import (
    Crash,
    PollRecord,
    StatusWrite,
    TableWrite,
    Trace,
)
from fdcore.simulator.world import SimulatedAgent, World


class TakeoverInTime(Checker):
    """(3) A crashed agent's request moves at the first poll that could move it.

    That poll is the first after the crash by a live agent whose poll met no store error, whose
    claim policy had room when the poll began (and did not spend it all on other requests under
    way: taken over, or its own whose answers were lost), and that may move it: another agent (with
    ``take_over``, and a clock within grace of the store's: one further off takes nothing over)
    by whose measure the crashed agent's record is past stale_after + grace (the store's time
    now against the store's time of the record's last write: agents judge by the listing's
    last-modified, fdcore.agent.liveness), or the
    crashed agent's restarted process (every poll with ``take_over``; its first poll without).
    Taken together with the poll interval this is invariant 3's "stale_after + grace + one poll"
    (docs/takeover.md, "Time to take over").

    A poll by an agent that still holds the request in memory (an attempt of its own from before
    a pause, which it gives up only at its next status update) counts as one that could: the
    design promises the bound. ``allow_stale_holds`` skips such polls instead, for a checker
    that measures how long takeover takes past pauses rather than judging the bound.
    """

    invariant = "3"
    title = "a crashed agent's request is taken over within stale_after + grace + one poll"

    def __init__(self, allow_stale_holds: bool = False) -> None:
        self.allow_stale_holds = allow_stale_holds
        self.moved = 0
        self.latencies: list[float] = []

    def _may_move(
        self, poll: PollRecord, crash: Crash, request: str, trace: Trace, s: Scenario
    ) -> bool:
        if poll.errors or not poll.free_before:
            return False
        if self.allow_stale_holds and request in poll.stale_held:
            return False
        if poll.room_spent:
            return False  # its room went to other requests under way: fine, they came first
        if poll.agent == crash.agent:
            return poll.incarnation > crash.incarnation and (s.take_over or poll.first)
        if not s.take_over or trace.affinity.get(request, poll.agent) != poll.agent:
            return False  # an unshared schedule's request is for its own agent only
        if abs(trace.skews.get(poll.agent, 0.0)) > s.grace_seconds + MEASUREMENT_ERROR:
            return False  # its clock is too far off the store's: it takes nothing over (ClockSkew)
        written = trace.record_written_at(crash.agent, poll.seq_start)
        # by its measure: its skew, kept to SKEW_RESOLUTION, may put a poll that close to the
        # bound on either side of it
        bound = s.stale_after + s.grace_seconds + SKEW_RESOLUTION
        return written is not None and poll.time > written + bound

    def finish(self, world: World) -> list[Violation]:
        s = world.scenario
        trace = world.trace
        starts = [poll.seq_start for poll in trace.polls]
        found: list[Violation] = []
        for crash in trace.crashes:
            for request, attempt in crash.held:
                moved = next((w for w in trace.status[request] if w.seq > crash.seq), None)
                if moved is not None:
                    self.moved += 1
                    self.latencies.append(moved.time - crash.time)
                for poll in trace.polls[bisect.bisect_right(starts, crash.seq) :]:
                    if moved is not None and moved.seq < poll.seq_start:
                        break
                    if self._may_move(poll, crash, request, trace, s):
                        if moved is None or moved.seq > poll.seq_end:
                            later = f"t={moved.time:.1f}" if moved else "never"
                            if request in poll.stale_held:
                                later += "; that agent still held it from before a pause"
                            found.append(
                                Violation(
                                    self.invariant,
                                    poll.time,
                                    f"{request} (attempt {attempt}) of crashed "
                                    f"{who(crash.agent, crash.incarnation)} (t={crash.time:.1f}) "
                                    f"was not moved by {who(poll.agent, poll.incarnation)}'s "
                                    f"poll at t={poll.time:.1f}, which could; moved {later}",
                                )
                            )
                        break
        return found

    def summary(self) -> dict[str, Any]:
        worst = max(self.latencies, default=0.0)
        return {"requests moved after a crash": self.moved, "takeover latency max s": worst}


def _lost_markings(trace: Trace) -> Iterator[tuple[StatusWrite, int, StatusWrite]]:
    """(write that began the attempt, attempt number, write that marked it lost), in order."""
    for writes in trace.status.values():
        began: dict[int, StatusWrite] = {}
        before: StatusWrite | None = None
        for write in writes:
            for number, _agent, outcome in write.attempts:
                began.setdefault(number, write)
                if outcome == "lost" and not (before and before.outcome(number) == "lost"):
                    yield began[number], number, write
            before = write


class NoTakeoverFromLiveAgent(Checker):
    """(3, the other side) An attempt is taken over only if its process died or went silent.

    "It never moves a run while its agent is alive and reporting": when a status write by
    another process marks an attempt ``lost``, the process that made the attempt has crashed,
    or at some point since the attempt began it wrote no status record for longer than
    stale_after (true time; the grace is what covers the agents' clock skew). The silence counts
    from the record as it stood when the attempt began: a process that claims while its record
    is stale is not reporting (and :class:`RecordInTime` says why its record was stale).
    """

    invariant = "3-live"
    title = "no attempt is taken over while its agent is alive and reporting"

    def __init__(self) -> None:
        self.lost = 0

    def finish(self, world: World) -> list[Violation]:
        s = world.scenario
        trace = world.trace
        crashed = {(c.agent, c.incarnation): c.seq for c in trace.crashes}
        found: list[Violation] = []
        for start, number, write in _lost_markings(trace):
            self.lost += 1
            process = (start.writer, start.incarnation)
            if (write.writer, write.incarnation) == process:
                continue  # its own process: OwnAttemptsNotLost's business
            if crashed.get(process, write.seq) < write.seq:
                continue
            last = trace.last_heartbeat(*process, start.seq)
            since = (start.seq, start.time if last is None else last)
            silence = trace.longest_silence(*process, since, (write.seq, write.time))
            if silence <= s.stale_after:
                found.append(
                    Violation(
                        self.invariant,
                        write.time,
                        f"{write.request}: attempt {number} of {who(*process)} marked lost by "
                        f"{who(write.writer, write.incarnation)}, though it was alive and "
                        f"reporting throughout (longest silence {silence:.1f}s)",
                    )
                )
        return found

    def summary(self) -> dict[str, Any]:
        return {"attempts marked lost": self.lost}


class RecordInTime(Checker):
    """An agent's status record is never older than ``stale_after / 4`` after a poll that began
    holding work and met no store error, nor older than ``stale_after / 2`` after one that
    began holding nothing.

    Every agent rewrites its own record every ``stale_after / 4`` while it holds work, every
    ``stale_after / 2`` while it holds nothing (docs/takeover.md, "Lost agents"); others judge
    it lost by that record alone, so a poll that claims or takes over work while its record is
    older hands that work to whoever reads the record next. Judged on the agent's own clock (a
    constant skew, so the same differences as virtual time).
    """

    invariant = "record"
    title = "an agent's status record is at most stale_after / 4 old (holding nothing: / 2)"

    def finish(self, world: World) -> list[Violation]:
        found = []
        for poll in world.trace.polls:
            if poll.errors:
                continue
            share = HEARTBEAT_SHARE if poll.held_before else IDLE_HEARTBEAT_SHARE
            interval = world.scenario.stale_after * share
            beats = world.trace.heartbeats.get((poll.agent, poll.incarnation), [])
            index = bisect.bisect_right(beats, (poll.seq_end, float("inf"))) - 1
            last = beats[index][1] if index >= 0 else None
            if last is None or poll.time - last >= interval + 1e-9:
                age = "never written" if last is None else f"{poll.time - last:.1f}s old"
                found.append(
                    Violation(
                        self.invariant,
                        poll.time,
                        f"{who(poll.agent, poll.incarnation)}'s poll at t={poll.time:.1f}s met "
                        f"no store error but left its status record {age} (its heartbeat "
                        f"interval is {interval:.1f}s)",
                    )
                )
        return found


class OwnAttemptsNotLost(Checker):
    """A process never marks its own attempt ``lost``: a lost attempt counts against
    max_attempts, and a process that is running is not lost to itself."""

    invariant = "lost-own"
    title = "no process marks its own attempt lost"

    def finish(self, world: World) -> list[Violation]:
        return [
            Violation(
                self.invariant,
                write.time,
                f"{write.request}: {who(write.writer, write.incarnation)} marked its own "
                f"attempt {number} lost and "
                + (
                    f"failed the request ({write.message})"
                    if write.final
                    else f"took the request again as attempt {write.attempt}"
                ),
            )
            for start, number, write in _lost_markings(world.trace)
            if (write.writer, write.incarnation) == (start.writer, start.incarnation)
        ]


class PausedAgentStops(Checker):
    """(4) A paused agent that resumes stops at its next status update and writes no table the
    new owner holds.

    Checked for every agent, not only resumed ones: a landed table write by a resumed agent
    carries the current lease; a run-log record carries the current lease generation, or the one
    its process held when its status write for that attempt landed (a record an outage kept
    back, written once the store answers); a status
    write never replaces another agent's attempt except by a takeover; and after a status update
    fails on the etag the agent no longer holds that attempt, at the latest when its first poll
    with no store error ends (the re-read that tells it may itself fail).
    """

    invariant = "4"
    title = "a resumed agent stops at its next status update and writes no table it lost"

    def __init__(self) -> None:
        self.resumed_after_takeover = 0
        self.stale_writes_rejected = 0
        self.live: list[Violation] = []
        # (agent, process, request) -> when its status update failed on the etag
        self.failed_updates: dict[tuple[str, int, str], float] = {}

    def after_reaction(self, world: World, agent: SimulatedAgent) -> None:
        self.after_poll(world, agent)  # a reaction's status writes are judged as a poll's

    def after_poll(self, world: World, agent: SimulatedAgent) -> None:
        process = agent.process
        assert process is not None
        for request in agent.store.lost_status_writes:
            self.failed_updates.setdefault((agent.name, agent.incarnation, request), world.now)
        for key, failed in list(self.failed_updates.items()):
            if key[:2] != (agent.name, agent.incarnation):
                continue
            request = key[2]
            work = process.held.get(request)
            latest = world.trace.latest.get(request)
            if (
                work is None
                or latest is None
                or (latest.agent == agent.name and latest.attempt == work.status.attempt)
            ):
                del self.failed_updates[key]  # let go, or still its own (a lost answer)
            elif not agent.store.poll_errors:
                del self.failed_updates[key]
                self.live.append(
                    Violation(
                        self.invariant,
                        world.now,
                        f"{who(agent.name, agent.incarnation)} still holds {request} (attempt "
                        f"{work.status.attempt}) after its status update failed at "
                        f"t={failed:.1f}s; the status names {latest.agent} attempt "
                        f"{latest.attempt}",
                    )
                )

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        return [
            *self.live,
            *self._writes_after_resuming(trace),
            *self._unvouched_run_records(trace),
            *self._statuses_rewritten(trace),
        ]

    def _writes_after_resuming(self, trace: Trace) -> list[Violation]:
        """A paused process whose request was taken meanwhile writes no table it lost."""
        found: list[Violation] = []
        by_attempt: dict[tuple[str, int, str, int], list[TableWrite]] = defaultdict(list)
        for table_write in trace.table_writes:
            by_attempt[attempt_of(table_write)].append(table_write)
        for pause in trace.pauses:
            if pause.resume_seq is None:
                continue
            for request, attempt in pause.held:
                # The paused process writes nothing, so any write in the pause is another's.
                taken = any(pause.seq < w.seq < pause.resume_seq for w in trace.status[request])
                if not taken:
                    continue
                self.resumed_after_takeover += 1
                for write in by_attempt.get((pause.agent, pause.incarnation, request, attempt), []):
                    if write.seq < pause.resume_seq:
                        continue
                    current = write.lease_generation == write.token
                    if not write.accepted:
                        self.stale_writes_rejected += 1
                    elif not current or write.lease_holder != write.agent:
                        found.append(
                            Violation(
                                self.invariant,
                                write.time,
                                f"resumed {who(pause.agent, pause.incarnation)} wrote table "
                                f"{write.table} for {request} (token {write.token}) while "
                                f"{write.lease_holder} held generation {write.lease_generation}",
                            )
                        )
        return found

    def _unvouched_run_records(self, trace: Trace) -> list[Violation]:
        """A run record names the lease's generation, unless its status vouched for it."""
        found: list[Violation] = []
        for record in trace.run_log:
            if record.generation != record.lease_generation and not record.vouched:
                found.append(
                    Violation(
                        self.invariant,
                        record.time,
                        f"{who(record.writer, record.incarnation)} logged table {record.table} "
                        f"of {record.request} under generation {record.generation} while the "
                        f"lease was at {record.lease_generation}",
                    )
                )
        return found

    def _statuses_rewritten(self, trace: Trace) -> list[Violation]:
        """No process rewrites the status of an attempt another agent holds."""
        found: list[Violation] = []
        for request, writes in trace.status.items():
            for held, change in itertools.pairwise(writes):
                if held.agent in (None, change.writer) or change.attempt > held.attempt:
                    continue
                if held.outcome(held.attempt) == "running" and change.outcome(held.attempt) in (
                    "lost",
                    "stopped",
                ):
                    continue  # a takeover that ends the request failed
                found.append(
                    Violation(
                        self.invariant,
                        change.time,
                        f"{request}: {who(change.writer, change.incarnation)} rewrote the "
                        f"status of attempt {held.attempt}, which {held.agent} holds",
                    )
                )
        return found

    def summary(self) -> dict[str, Any]:
        return {
            "paused agents resumed after a takeover": self.resumed_after_takeover,
            "their table writes rejected": self.stale_writes_rejected,
        }


class LostRequestsFail(Checker):
    """(5) A request that crashes every agent ends ``failed`` after max_attempts, naming every
    agent, and runs in at most max_attempts attempts; any request failed by lost attempts names
    every agent that tried it."""

    invariant = "5"
    title = "a request that crashes every agent fails after max_attempts, naming every agent"

    def __init__(self) -> None:
        self.poison_failed = 0

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        found: list[Violation] = []
        # A table run again within one attempt (its lease lapsed) crashed no other agent.
        attempts_run: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
        for start in trace.table_starts:
            attempts_run[start.request].add((start.agent, start.incarnation, start.attempt))
        for request, latest in trace.latest.items():
            lost = [a for a in latest.attempts if a[2] == "lost"]
            limit = trace.max_attempts[request]
            poison = request in trace.poison
            failed_lost = latest.state == "failed" and len(lost) >= limit
            problems = []
            if poison and not failed_lost:
                problems.append(f"ended {latest.state} with {len(lost)} lost attempts")
            if failed_lost:
                if len(lost) != limit:
                    problems.append(f"failed after {len(lost)} lost attempts, not {limit}")
                named = latest.message or ""
                missing = sorted({a[1] for a in latest.attempts if a[1] not in named})
                if missing:
                    problems.append(f"its message {named!r} does not name {', '.join(missing)}")
            ran = attempts_run.get(request, set())
            if poison and len(ran) > limit:
                problems.append(f"ran in {len(ran)} attempts")
            if poison and not problems:
                self.poison_failed += 1
            found.extend(
                Violation(self.invariant, latest.time, f"{request}: {text} (max_attempts {limit})")
                for text in problems
            )
        return found

    def summary(self) -> dict[str, Any]:
        return {"poison requests failed as they should": self.poison_failed}
