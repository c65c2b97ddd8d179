"""The table checkers: one writer per table under a live lease, each table once per attempt
and once per request, every run in the run log.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

from fdcore.simulator.invariants import Checker, Violation, attempt_of, who
from fdcore.simulator.trace import (
    RunLogWrite,
    TableWrite,
)
from fdcore.simulator.world import World


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
            rerun = attempt_of(earlier) == attempt_of(later)  # the "once" checker's business
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
                        f"{who(write.agent, write.incarnation)} ran table {write.table} again "
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
                        f"{who(write.agent, write.incarnation)} (attempt {write.attempt}, "
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
                f"{who(start.agent, start.incarnation)} started table {start.table} of "
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
                        f"{who(record.writer, record.incarnation)} (attempt {record.attempt}); "
                        f"first by {who(first.writer, first.incarnation)} (attempt "
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
                            f"{who(write.writer, write.incarnation)} (attempt {write.attempt}) "
                            "has no run record, though that process polled cleanly since",
                        )
                    )
                done = write.tables_done
        return found

    def summary(self) -> dict[str, Any]:
        return {"run records owed at a crash or the end": self.excused}
