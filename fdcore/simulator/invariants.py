"""The invariant checkers: each reads the trace (and may watch polls live) and returns violations.

A checker is any object with the four methods of :class:`Checker`. The world calls the live
hooks of the checkers it is given; whoever built it then asks each for its violations
(``finish``). :func:`fdcore.simulator.simulation.default_checkers` is the list a run checks by
default, so a new invariant is a new class in that list. Numbers and names are the ids of the
table in docs/simulator.md, "What is checked"; shared schedules (1) are judged in
:mod:`fdcore.simulator.schedules`.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import attrs

from fdcore.abc import AgentLoad
from fdcore.agent.presence import HEARTBEAT_SHARE, IDLE_HEARTBEAT_SHARE
from fdcore.agent.skew import MEASUREMENT_ERROR
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archived_ids, find_request_files
from fdcore.simulator.scenario import Scenario
from fdcore.simulator.trace import (
    Crash,
    PollRecord,
    RunLogWrite,
    StatusWrite,
    TableWrite,
    Trace,
)
from fdcore.simulator.world import SimulatedAgent, World


@attrs.frozen
class Violation:
    invariant: str  # "1".."6", or a name: "final", "once", "agent", ...
    time: float  # virtual seconds
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "time": round(self.time, 3), "message": self.message}


class Checker:
    """Base of the checkers: every hook is optional."""

    invariant = ""
    title = ""

    def after_poll(self, world: World, host: SimulatedAgent) -> None:
        """Called after every agent poll that did not raise (state is consistent here)."""

    def after_reaction(self, world: World, host: SimulatedAgent) -> None:
        """Called after every reaction between polls (:meth:`Agent.react`) that did not raise."""

    def after_change(self, world: World) -> None:
        """Called after an agent starts, crashes, pauses or resumes."""

    def finish(self, world: World) -> list[Violation]:
        """Read the finished world's trace; return what broke."""
        return []

    def summary(self) -> dict[str, Any]:
        """Figures for the report (what was exercised, what was measured)."""
        return {}


def _who(agent: str, incarnation: int) -> str:
    return f"{agent} (process {incarnation})"


class AgentsNeverRaise(Checker):
    """An agent's poll never raises: bad files and store outages are handled inside the poll."""

    invariant = "agent"
    title = "agents never raise out of a poll"

    def finish(self, world: World) -> list[Violation]:
        return [Violation(self.invariant, when, text) for when, text in world.agent_errors]


class OneWriterPerTable(Checker):
    """(2) No table ever has two writers at once; a write with a stale token is rejected.

    A writer is a table run whose fenced write landed, over [run start, write]. Landed writes
    must carry the lease's generation at that moment, rise per table, and never overlap.
    """

    invariant = "2"
    title = "no table has two writers at once; stale tokens are rejected"

    def __init__(self) -> None:
        self.rejected = 0
        self.landed = 0

    def finish(self, world: World) -> list[Violation]:
        found: list[Violation] = []
        by_table: dict[str, list[TableWrite]] = defaultdict(list)
        for write in world.trace.table_writes:
            if not write.accepted:
                self.rejected += 1
                continue
            self.landed += 1
            by_table[write.table].append(write)
            found.extend(self._unfenced(write))
        for table, writes in by_table.items():
            found.extend(self._out_of_order(table, writes))
            found.extend(self._overlapping(table, writes))
        return found

    def _unfenced(self, write: TableWrite) -> list[Violation]:
        """A write that landed with a token other than the lease's, or under another's lease."""
        if write.lease_generation != write.token:
            return [
                Violation(
                    self.invariant,
                    write.time,
                    f"table {write.table}: write by {write.agent} for {write.request} with "
                    f"token {write.token} landed while the lease was at generation "
                    f"{write.lease_generation}",
                )
            ]
        if (write.lease_holder, write.lease_request) != (write.agent, write.request):
            return [
                Violation(
                    self.invariant,
                    write.time,
                    f"table {write.table}: write by {write.agent} for {write.request} landed "
                    f"under a lease {write.lease_holder} holds for {write.lease_request}",
                )
            ]
        return []

    def _out_of_order(self, table: str, writes: list[TableWrite]) -> list[Violation]:
        """Tokens of one table's landed writes never go back (nor repeat across attempts)."""
        found = []
        for earlier, later in itertools.pairwise(writes):
            rerun = _attempt(earlier) == _attempt(later)  # the "once" checker's business
            if later.token < earlier.token or (later.token == earlier.token and not rerun):
                found.append(
                    Violation(
                        self.invariant,
                        later.time,
                        f"table {table}: token {later.token} ({later.agent}, "
                        f"{later.request}) landed after token {earlier.token} "
                        f"({earlier.agent}, {earlier.request})",
                    )
                )
        return found

    def _overlapping(self, table: str, writes: list[TableWrite]) -> list[Violation]:
        """No two landed runs of one table overlap in time."""
        found = []
        ordered = sorted(writes, key=lambda w: (w.run_started, w.seq))
        busy_until, holder = float("-inf"), ordered[0]
        for write in ordered:
            if write.run_started < busy_until:
                found.append(
                    Violation(
                        self.invariant,
                        write.run_started,
                        f"table {table}: two writers at once: {holder.agent} for "
                        f"{holder.request} (t={holder.run_started:.1f}..{holder.time:.1f}) "
                        f"and {write.agent} for {write.request} "
                        f"(t={write.run_started:.1f}..{write.time:.1f})",
                    )
                )
            if write.time > busy_until:
                busy_until, holder = write.time, write
        return found

    def summary(self) -> dict[str, Any]:
        return {"table writes landed": self.landed, "stale table writes rejected": self.rejected}


class LeaseHeldUntilItRunsOut(Checker):
    """(2, the lease side) A live agent's table lease is never taken before it runs out by the
    holder's own clock: two agents never both believe they hold one table.

    Fencing makes the earlier holder's write fail afterwards; this checks that the lease
    itself held, which matters for every side effect a fencing token does not guard.
    """

    invariant = "2-lease"
    title = "no live agent's table lease is taken before it runs out by its own clock"

    def __init__(self) -> None:
        self.taken = 0

    def finish(self, world: World) -> list[Violation]:
        found: list[Violation] = []
        crashed = {(c.agent, c.incarnation): c.seq for c in world.trace.crashes}
        for taken in world.trace.leases_taken:
            self.taken += 1
            before = taken.before
            alive = crashed.get((before.holder, before.incarnation), taken.seq) >= taken.seq
            if alive and taken.before_clock < before.expires_at:
                found.append(
                    Violation(
                        self.invariant,
                        taken.time,
                        f"table {taken.table}: {taken.after.holder} took the lease (generation "
                        f"{taken.after.generation}) from live {before.holder} "
                        f"{before.expires_at - taken.before_clock:.1f}s before it ran out by "
                        f"{before.holder}'s own clock",
                    )
                )
        return found

    def summary(self) -> dict[str, Any]:
        return {"leases taken from another holder": self.taken}


def _attempt(write: TableWrite) -> tuple[str, int, str, int]:
    return (write.agent, write.incarnation, write.request, write.attempt)


class TableOncePerAttempt(Checker):
    """An attempt runs each of its tables once: a table that ended is recorded, not run again.

    The one exception is a run whose lease another holder took meanwhile (a lease that lapsed
    while its agent was slow or paused): its result cannot be trusted, so the attempt runs the
    table again under a new lease. That shows as a token more than one above the first run's.
    (Not one of the numbered invariants: a table writer whose side effects do not check the
    fencing token would repeat them.)
    """

    invariant = "once-per-attempt"
    title = "an attempt runs each table once"

    def finish(self, world: World) -> list[Violation]:
        seen: dict[tuple[str, int, str], TableWrite] = {}
        found = []
        for write in world.trace.table_writes:
            key = (write.request, write.attempt, write.table)
            first = seen.setdefault(key, write)
            interrupted = write.token > first.token + 1  # another holder leased it in between
            if interrupted:
                seen[key] = write
            elif first is not write:
                found.append(
                    Violation(
                        self.invariant,
                        write.run_started,
                        f"{write.request} attempt {write.attempt}: "
                        f"{_who(write.agent, write.incarnation)} ran table {write.table} again "
                        f"(token {write.token}) after its run ended at t={first.time:.1f} "
                        f"({'landed' if first.accepted else 'rejected'})",
                    )
                )
        return found


class RunsOncePerRequest(Checker):
    """A table of a request succeeds at most once, whatever its attempts (invariant 15).

    No table run starts once the request's status records the table done, and no two of its
    runs' fenced writes land (a table succeeding twice: a slow holder taken over finished it,
    and the taker ran it again); the run log holds at most one succeeded record per table of a
    request. With :class:`SucceedsOnce` this is invariant 1's "at most one successful run",
    checked for every request.
    """

    invariant = "once-per-request"
    title = "a table of a request succeeds once, and never runs after it is recorded done"

    def __init__(self) -> None:
        self.twice = 0

    def summary(self) -> dict[str, Any]:
        return {"tables succeeded twice": self.twice}

    def finish(self, world: World) -> list[Violation]:
        found = self._written_twice(world)
        return found + self._started_or_logged_again(world)

    def _written_twice(self, world: World) -> list[Violation]:
        """A table succeeding twice (two accepted writes) is a violation when the second run
        started after a succeeded run record of the table landed: an attempt had finished it
        under an accepted fence (the record is written only while the lease is still the
        run's). Else the holder never recorded it (it crashed, or came back to a lease already
        taken, not knowing whether its write landed): counted only."""
        trace = world.trace
        recorded: dict[tuple[str, str], RunLogWrite] = {}
        for record in trace.run_log:
            if record.outcome == "succeeded":
                recorded.setdefault((record.request, record.table), record)
        found = []
        written: dict[tuple[str, str], TableWrite] = {}
        for write in trace.table_writes:
            if not write.accepted:
                continue
            first = written.setdefault((write.request, write.table), write)
            if first is write:
                continue
            self.twice += 1
            done = recorded.get((write.request, write.table))
            if done is not None and done.time <= write.run_started:
                found.append(
                    Violation(
                        self.invariant,
                        write.time,
                        f"{write.request}: table {write.table} succeeded again by "
                        f"{_who(write.agent, write.incarnation)} (attempt {write.attempt}, "
                        f"token {write.token}) after attempt {done.attempt} recorded it "
                        f"succeeded at t={done.time:.1f} (token {done.generation})",
                    )
                )
        return found

    def _started_or_logged_again(self, world: World) -> list[Violation]:
        found = [
            Violation(
                self.invariant,
                start.time,
                f"{_who(start.agent, start.incarnation)} started table {start.table} of "
                f"{start.request} (attempt {start.attempt}) after its status recorded it done",
            )
            for start in world.trace.table_starts
            if start.recorded_done
        ]
        logged: dict[tuple[str, str], RunLogWrite] = {}
        for record in world.trace.run_log:
            if record.outcome != "succeeded":
                continue
            first = logged.setdefault((record.request, record.table), record)
            if first is not record:
                found.append(
                    Violation(
                        self.invariant,
                        record.time,
                        f"{record.request}: table {record.table} logged succeeded again by "
                        f"{_who(record.writer, record.incarnation)} (attempt {record.attempt}); "
                        f"first by {_who(first.writer, first.incarnation)} (attempt "
                        f"{first.attempt}) at t={first.time:.1f}",
                    )
                )
        return found


def _first_success(run_log: list[RunLogWrite]) -> dict[tuple[str, str], tuple[int, int]]:
    """(request, table) -> (seq, attempt) of its first succeeded run record."""
    first: dict[tuple[str, str], tuple[int, int]] = {}
    for record in run_log:
        if record.outcome == "succeeded":
            first.setdefault((record.request, record.table), (record.seq, record.attempt))
    return first


class RunLogComplete(Checker):
    """Every table a status write recorded done has its succeeded run record, written by the
    same process, unless that process never again polled without a store error (it crashed, or
    the run ended first), or an earlier attempt's succeeded record landed before (the table ran
    then, and was recorded done without running again): the run log is what ``fdcore show``
    tells a request's story from."""

    invariant = "run-log"
    title = "every table recorded done has its run record"

    def __init__(self) -> None:
        self.excused = 0

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        logged = {
            (r.request, r.table, r.attempt, r.writer, r.incarnation)
            for r in trace.run_log
            if r.outcome == "succeeded"
        }
        earlier = _first_success(trace.run_log)
        clean_polls: dict[tuple[str, int], list[int]] = defaultdict(list)
        for poll in trace.polls:
            if poll.errors == 0:
                clean_polls[(poll.agent, poll.incarnation)].append(poll.seq_start)
        found = []
        for request, writes in trace.status.items():
            done: tuple[str, ...] = ()
            for write in writes:
                for table in (t for t in write.tables_done if t not in done):
                    key = (request, table, write.attempt, write.writer, write.incarnation)
                    if key in logged:
                        continue
                    ran = earlier.get((request, table))
                    if ran is not None and ran[0] < write.seq and ran[1] < write.attempt:
                        continue  # done by an earlier attempt, whose record stands
                    later = clean_polls[(write.writer, write.incarnation)]
                    if not later or later[-1] < write.seq:
                        self.excused += 1  # no clean poll after it: the record may be owed
                        continue
                    found.append(
                        Violation(
                            self.invariant,
                            write.time,
                            f"{request}: table {table} recorded done by "
                            f"{_who(write.writer, write.incarnation)} (attempt {write.attempt}) "
                            "has no run record, though that process polled cleanly since",
                        )
                    )
                done = write.tables_done
        return found

    def summary(self) -> dict[str, Any]:
        return {"run records owed at a crash or the end": self.excused}


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
    design promises the bound. ``allow_stale_holds`` skips such polls instead (finding 5).
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
        return written is not None and poll.time > written + s.stale_after + s.grace_seconds

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
                                    f"{_who(crash.agent, crash.incarnation)} (t={crash.time:.1f}) "
                                    f"was not moved by {_who(poll.agent, poll.incarnation)}'s "
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
                        f"{write.request}: attempt {number} of {_who(*process)} marked lost by "
                        f"{_who(write.writer, write.incarnation)}, though it was alive and "
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
                        f"{_who(poll.agent, poll.incarnation)}'s poll at t={poll.time:.1f}s met "
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
                f"{write.request}: {_who(write.writer, write.incarnation)} marked its own "
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

    def after_reaction(self, world: World, host: SimulatedAgent) -> None:
        self.after_poll(world, host)  # a reaction's status writes are judged as a poll's

    def after_poll(self, world: World, host: SimulatedAgent) -> None:
        agent = host.agent
        assert agent is not None
        for request in host.store.lost_status_writes:
            self.failed_updates.setdefault((host.name, host.incarnation, request), world.now)
        for key, failed in list(self.failed_updates.items()):
            if key[:2] != (host.name, host.incarnation):
                continue
            request = key[2]
            work = agent.held.get(request)
            latest = world.trace.latest.get(request)
            if (
                work is None
                or latest is None
                or (latest.agent == host.name and latest.attempt == work.status.attempt)
            ):
                del self.failed_updates[key]  # let go, or still its own (a lost answer)
            elif not host.store.poll_errors:
                del self.failed_updates[key]
                self.live.append(
                    Violation(
                        self.invariant,
                        world.now,
                        f"{_who(host.name, host.incarnation)} still holds {request} (attempt "
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
            by_attempt[_attempt(table_write)].append(table_write)
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
                                f"resumed {_who(pause.agent, pause.incarnation)} wrote table "
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
                        f"{_who(record.writer, record.incarnation)} logged table {record.table} "
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
                        f"{request}: {_who(change.writer, change.incarnation)} rewrote the "
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


class NoStrandedRequests(Checker):
    """(6) With ``when_free``, a busy agent never holds an unstarted request while another live
    agent has a free worker.

    Watched after every poll and every crash, pause and resume. Stranded requests are counted
    under any claim policy (that is the figure that compares them); only ``when_free`` fails.
    """

    invariant = "6"
    title = "with when_free, no busy agent holds a request another agent has room for"

    def __init__(self, claim: str) -> None:
        self.enforced = claim == "when_free"
        self.stranded: dict[str, tuple[float, str]] = {}
        # Each live agent's load as its last step left it: only its own steps (polls,
        # reactions) change it, and the world's changes (start, crash, pause, resume), after
        # which every load is taken again. A poll so costs one load, not the fleet's.
        self.loads: dict[str, AgentLoad] = {}
        self.roomy: set[str] = set()  # live agents with a free worker
        self.full: set[str] = set()  # live agents with every worker busy and a request waiting

    def after_poll(self, world: World, host: SimulatedAgent) -> None:
        self._took(host)
        self._judge(world)

    def after_reaction(self, world: World, host: SimulatedAgent) -> None:
        self.after_poll(world, host)

    def after_change(self, world: World) -> None:
        self.loads.clear()
        self.roomy.clear()
        self.full.clear()
        for host in world.hosts:
            self._took(host)
        self._judge(world)

    def _took(self, host: SimulatedAgent) -> None:
        """Note the load ``host``'s agent has now (none if it is not live)."""
        name = host.name
        self.roomy.discard(name)
        self.full.discard(name)
        if not (host.live and host.agent):
            self.loads.pop(name, None)
            return
        load = self.loads[name] = host.agent.load()
        if load.running + load.waiting < load.concurrency:
            self.roomy.add(name)
        elif load.waiting and load.running >= load.concurrency:
            self.full.add(name)

    def _judge(self, world: World) -> None:
        if not self.roomy or not self.full:
            return
        for host in world.hosts:  # in the fleet's order, as the requests were always noted
            if host.name in self.full and self.roomy - {host.name}:
                assert host.agent is not None
                for request, work in host.agent.held.items():
                    if not work.running:
                        self.stranded.setdefault(request, (world.now, host.name))

    def finish(self, world: World) -> list[Violation]:
        if not self.enforced:
            return []
        return [
            Violation(
                self.invariant,
                when,
                f"{request} waited unstarted on busy {agent} while another agent had room",
            )
            for request, (when, agent) in sorted(self.stranded.items())
        ]

    def summary(self) -> dict[str, Any]:
        return {"stranded requests": len(self.stranded)}


class EveryRequestFinal(Checker):
    """No request is lost: every request ends in a final state before the time limit."""

    invariant = "final"
    title = "every request ends final"

    def finish(self, world: World) -> list[Violation]:
        found = []
        if world.arrived < world.total:
            found.append(
                Violation(
                    self.invariant,
                    world.now,
                    f"only {world.arrived} of {world.total} requests arrived by the time limit",
                )
            )
        for request in sorted(world.trace.created):
            latest = world.trace.latest.get(request)
            if latest is None or not latest.final:
                where = f"{latest.state} on {latest.agent}" if latest else "never claimed"
                found.append(
                    Violation(
                        self.invariant,
                        world.now,
                        f"{request} not final at the end (t={world.now:.0f}): {where}",
                    )
                )
        return found


class SucceedsOnce(Checker):
    """No request succeeds twice: one ``succeeded`` status write at most per request."""

    invariant = "once"
    title = "no request succeeds twice"

    def finish(self, world: World) -> list[Violation]:
        found = []
        for request, writes in world.trace.status.items():
            successes = [w for w in writes if w.state == "succeeded"]
            if len(successes) > 1:
                who = ", ".join(f"{w.writer} at t={w.time:.1f}" for w in successes)
                found.append(
                    Violation(
                        self.invariant, successes[1].time, f"{request} succeeded twice: {who}"
                    )
                )
        return found


class CancelsHonoured(Checker):
    """An operator's cancel is honoured: no table of a request starts on an agent process after
    that process listed ``cancels/`` and found the request there (docs/operations.md)."""

    invariant = "cancel"
    title = "no table starts after its holder saw the request's cancel"

    def __init__(self) -> None:
        self.ended_cancelled = 0
        self.cancels = 0

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        first_seen: dict[tuple[str, int, str], int] = {}
        for seen in trace.cancels_seen:
            for request in seen.requests:
                first_seen.setdefault((seen.agent, seen.incarnation, request), seen.seq)
        self.cancels = len(trace.cancels)
        self.ended_cancelled = sum(
            1 for request in trace.cancels if trace.latest[request].state == "cancelled"
        )
        return [
            Violation(
                self.invariant,
                start.time,
                f"{start.request}: table {start.table} started on "
                f"{_who(start.agent, start.incarnation)} after it saw the request's cancel",
            )
            for start in trace.table_starts
            if first_seen.get((start.agent, start.incarnation, start.request), start.seq)
            < start.seq
        ]

    def summary(self) -> dict[str, Any]:
        return {"cancels": self.cancels, "requests ended cancelled": self.ended_cancelled}


class ArchivedWhole(Checker):
    """With the product's retention (``--retention-keep``, ``--retention-runs``): every request
    is found whole once, live or archived, with the final state the trace last saw; a live
    request is never left without its status, nor a live run record without its request; and
    none is claimed again after it finished (the archive's moves lose nothing and make no
    request run twice; that no slot is created twice is SharedSchedules')."""

    invariant = "archived-whole"
    title = "retention loses no request and runs none twice"

    def __init__(self) -> None:
        self.archived = 0

    def finish(self, world: World) -> list[Violation]:
        if not (world.scenario.retention_keep or world.scenario.retention_runs):
            return []
        found = []
        mailbox = Mailbox(world.store)
        live_requests = set(mailbox.request_ids())
        live_statuses = set(mailbox.status_ids())
        self.archived = len(list(archived_ids(mailbox)))
        for request in sorted(world.trace.created):
            latest = world.trace.latest.get(request)
            files = find_request_files(mailbox, request)
            if files is None or files.request is None:
                found.append(Violation(self.invariant, world.now, f"{request} is lost"))
                continue
            state = files.status.state.value if files.status else None
            if latest is not None and latest.final and state != latest.state:
                found.append(
                    Violation(
                        self.invariant,
                        world.now,
                        f"{request} reads {state} ({'archived' if files.archived else 'live'}),"
                        f" its last status write was {latest.state}",
                    )
                )
            if request in live_requests and request not in live_statuses and latest is not None:
                found.append(
                    Violation(self.invariant, world.now, f"{request} left live without status")
                )
        for key in world.store.list("runs/"):
            request = key.split("/")[1]
            if request not in live_statuses:
                found.append(
                    Violation(self.invariant, world.now, f"{key} left live without its request")
                )
        for request, writes in world.trace.status.items():
            ended = next((w for w in writes if w.final), None)
            again = [
                w
                for w in writes
                if ended is not None
                and w.seq > ended.seq
                and not w.final
                and w.seq not in world.trace.withdrawn
            ]
            if again:
                found.append(
                    Violation(
                        self.invariant,
                        again[0].time,
                        f"{request} was {again[0].state} again by {again[0].writer} after it "
                        f"ended {ended.state if ended else ''}",
                    )
                )
        return found

    def summary(self) -> dict[str, Any]:
        return {"requests archived": self.archived}


class FinalStaysFinal(Checker):
    """(13) A request that is final is never claimed again, and archived history is never
    replaced: after a request's first final status, no status write lands for it but one its
    writer withdrew (a claim that landed after retention moved the request) or the same end
    again, no table of it starts, and no file once archived is changed or deleted. Exercised
    by ``--retention-runs`` (a retention process whose store calls land between an agent's)."""

    invariant = "13"
    title = "a request final once is never claimed again; archived history is never replaced"

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}  # what the retention process did, when there is one

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        if world.retention is not None:
            self.runs = {
                "retention runs": world.stats["retention runs"],
                "retention runs killed": world.stats["retention runs killed"],
                "requests moved by retention runs": len(world.retention.tally.moved),
                "claims withdrawn after a move": len(trace.withdrawn),
            }
        found = []
        for request, writes in trace.status.items():
            ended_seq = trace.ended.get(request)
            if ended_seq is None:
                continue
            ended = next(w for w in writes if w.seq == ended_seq)
            for write in writes:
                if write.seq <= ended_seq or write.seq in trace.withdrawn:
                    continue
                if (write.state, write.attempt) != (ended.state, ended.attempt):
                    found.append(
                        Violation(
                            self.invariant,
                            write.time,
                            f"{request} ended {ended.state}, then {write.writer} wrote it"
                            f" {write.state} (attempt {write.attempt})",
                        )
                    )
                    break
        for start in trace.table_starts:
            ended_seq = trace.ended.get(start.request)
            if ended_seq is not None and start.seq > ended_seq:
                found.append(
                    Violation(
                        self.invariant,
                        start.time,
                        f"{_who(start.agent, start.incarnation)} started {start.request}'s"
                        f" table {start.table} after the request ended",
                    )
                )
        for _seq, time, writer, key in trace.archive_replaced:
            found.append(Violation(self.invariant, time, f"{writer} replaced archived {key}"))
        return found

    def summary(self) -> dict[str, Any]:
        return dict(self.runs)
