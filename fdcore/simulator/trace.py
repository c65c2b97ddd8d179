"""What a simulation run recorded, for the invariant checkers to read afterwards.

Every record carries ``seq``, one counter over the whole run, so "before" and "after" are exact
even for things that happened at the same virtual instant (a poll is atomic in virtual time).
Times are true virtual seconds since the start, not any agent's skewed view.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from datetime import datetime

import attrs


@attrs.define(slots=True)
class StatusWrite:
    """A status file write that landed (claim, takeover, progress, final)."""

    seq: int
    time: float
    writer: str
    incarnation: int
    request: str
    state: str
    agent: str | None
    attempt: int
    attempts: tuple[tuple[int, str, str], ...]  # (number, agent, outcome)
    message: str | None
    tables_done: tuple[str, ...] = ()

    @property
    def final(self) -> bool:
        return self.state not in ("accepted", "running")

    def outcome(self, number: int) -> str | None:
        for n, _agent, outcome in self.attempts:
            if n == number:
                return outcome
        return None


@attrs.define(slots=True)
class LeaseState:
    generation: int
    holder: str
    request: str
    attempt: int
    released: bool
    expires_at: float  # in the holder's clock, virtual seconds
    incarnation: int  # the holder's process


@attrs.define(slots=True)
class LeaseTaken:
    """A lease acquisition that replaced another holder's unreleased lease."""

    seq: int
    time: float
    table: str
    before: LeaseState
    after: LeaseState
    before_clock: float  # the earlier holder's clock at that moment


@attrs.define(slots=True)
class TableWrite:
    """A simulated table run's fenced write at the end of the run, landed or rejected."""

    seq: int
    time: float
    table: str
    token: int
    agent: str
    incarnation: int
    request: str
    attempt: int
    run_started: float
    accepted: bool
    lease_generation: int | None  # the table lease's generation when the write was tried
    lease_holder: str | None
    lease_request: str | None


@attrs.define(slots=True)
class RunLogWrite:
    """A run-log record an agent created, with the table's lease generation at that moment."""

    seq: int
    time: float
    writer: str
    incarnation: int
    request: str
    table: str
    attempt: int
    generation: int
    lease_generation: int | None
    outcome: str = "succeeded"
    # a status write of the same process and attempt landed while it held the table's lease at
    # ``generation``: the record tells of that run, even once the lease has moved on
    vouched: bool = False


@attrs.define(slots=True)
class TableStart:
    """A table run an agent started, and whether the request's status already had it done."""

    seq: int
    time: float
    agent: str
    incarnation: int
    request: str
    table: str
    attempt: int
    recorded_done: bool  # the status (as stored) listed the table in tables_done


@attrs.define(slots=True)
class CancelsSeen:
    """An agent's listing of ``cancels/``: the requests it then knew were cancelled."""

    seq: int
    time: float
    agent: str
    incarnation: int
    requests: frozenset[str]


@attrs.define(slots=True)
class ScheduleCreate:
    """An agent's create of a schedule's request (``requests/<id>.json``): landed or not."""

    seq: int
    time: float
    agent: str
    incarnation: int
    clock: datetime  # the agent's clock at the create
    request: str  # from the key
    schedule: str | None  # the request's ``schedule {id, slot}``
    slot: str | None
    created_at: datetime
    deadline: datetime | None
    entities: tuple[str, ...]
    outcome: str  # landed | landed, answer lost | exists | failed (raised before applying)

    @property
    def landed(self) -> bool:
        return self.outcome.startswith("landed")

    @property
    def raised(self) -> bool:
        """The agent got a store error, whether or not the write landed."""
        return self.outcome in ("failed", "landed, answer lost")


@attrs.define(slots=True)
class PollRecord:
    """One agent poll: who, when, whether the store failed it, room before and after."""

    seq_start: int
    seq_end: int
    time: float
    agent: str
    incarnation: int
    first: bool  # the incarnation's first poll
    clock: float  # the agent's own view of the time, in virtual seconds
    errors: int  # store operations that raised StorageUnavailable
    free_before: bool  # the claim policy allowed one more request when the poll began
    room_spent: bool  # ... and said no within the poll before any new claim (see WatchedClaim)
    lost_status_writes: tuple[str, ...]  # requests whose status replace failed on the etag
    stale_held: tuple[str, ...]  # held when the poll began, though the status names another
    held_before: bool = False  # it held a request when the poll began (its heartbeat's cadence)


@attrs.define(slots=True)
class Start:
    """An agent process started (at the beginning or after a crash)."""

    seq: int
    time: float
    agent: str
    incarnation: int


@attrs.define(slots=True)
class Crash:
    seq: int
    time: float
    agent: str
    incarnation: int
    cause: str  # "fault", "poison" or "exception"
    held: tuple[tuple[str, int], ...]  # (request, attempt) whose status named it


@attrs.define(slots=True)
class Pause:
    seq: int
    start: float
    end: float
    agent: str
    incarnation: int
    held: tuple[tuple[str, int], ...]  # (request, attempt) whose status named it
    resume_seq: int | None = None  # None while paused (or if it crashed while paused)


@attrs.define
class Trace:
    """Everything the checkers read, in order of ``seq``."""

    skews: dict[str, float] = attrs.field(factory=dict)
    created: dict[str, float] = attrs.field(factory=dict)  # request -> arrival time
    poison: set[str] = attrs.field(factory=set)
    max_attempts: dict[str, int] = attrs.field(factory=dict)  # request -> its limit
    first_start: dict[str, float] = attrs.field(factory=dict)  # request -> first table start
    status: dict[str, list[StatusWrite]] = attrs.field(factory=dict)  # request -> writes
    latest: dict[str, StatusWrite] = attrs.field(factory=dict)
    heartbeats: dict[tuple[str, int], list[tuple[int, float]]] = attrs.field(factory=dict)
    record_writes: dict[str, list[tuple[int, float, float]]] = attrs.field(factory=dict)
    leases: dict[str, LeaseState] = attrs.field(factory=dict)
    leases_taken: list[LeaseTaken] = attrs.field(factory=list)
    table_writes: list[TableWrite] = attrs.field(factory=list)
    run_log: list[RunLogWrite] = attrs.field(factory=list)
    # (request, attempt, table, generation, agent, process): the table leases a process held for
    # a request's attempt when one of its status writes for that attempt landed
    held_at_status: set[tuple[str, int, str, int, str, int]] = attrs.field(factory=set)
    polls: list[PollRecord] = attrs.field(factory=list)
    crashes: list[Crash] = attrs.field(factory=list)
    pauses: list[Pause] = attrs.field(factory=list)
    table_starts: list[TableStart] = attrs.field(factory=list)
    cancels: dict[str, int] = attrs.field(factory=dict)  # request -> seq of its cancel
    cancels_seen: list[CancelsSeen] = attrs.field(factory=list)
    starts: list[Start] = attrs.field(factory=list)
    affinity: dict[str, str] = attrs.field(factory=dict)  # request -> the only agent it is for
    schedule_creates: list[ScheduleCreate] = attrs.field(factory=list)
    # retention's deletes of live files: (time, agent, "requests" or "status", request)
    removals: list[tuple[float, str, str, str]] = attrs.field(factory=list)
    ended: dict[str, int] = attrs.field(factory=dict)  # request -> seq of its first final status
    # seqs of status writes their writer withdrew (a claim that landed after retention moved
    # the request: fdcore.mailbox.archive.create_status)
    withdrawn: set[int] = attrs.field(factory=set)
    archive: dict[str, bytes] = attrs.field(factory=dict)  # archived file -> what first landed
    run_records: dict[str, bytes] = attrs.field(factory=dict)  # live run record -> first landed
    # (seq, time, writer, key) of every write or delete that changed an archived file
    archive_replaced: list[tuple[int, float, str, str]] = attrs.field(factory=list)
    # landed writes (request, status, leases, run log) per schedule request
    schedule_writes: Counter[str] = attrs.field(factory=Counter)

    def last_heartbeat(self, agent: str, incarnation: int, seq: int) -> float | None:
        """True time of the incarnation's last status record write before ``seq``."""
        beats = self.heartbeats.get((agent, incarnation), [])
        index = bisect.bisect_left(beats, (seq, float("-inf"))) - 1
        return beats[index][1] if index >= 0 else None

    def longest_silence(
        self, agent: str, incarnation: int, since: tuple[int, float], until: tuple[int, float]
    ) -> float:
        """The longest stretch without a status record write by the process, between two
        (seq, time) points."""
        beats = self.heartbeats.get((agent, incarnation), [])
        start = bisect.bisect_right(beats, (since[0], float("inf")))
        end = bisect.bisect_left(beats, (until[0], float("-inf")))
        times = [since[1], *(t for _, t in beats[start:end]), until[1]]
        return max(b - a for a, b in itertools.pairwise(times))

    def record_updated_at(self, agent: str, seq: int) -> float | None:
        """The ``updated_at`` of the agent's record as stored at ``seq``, as its writer wrote it (by
        its clock, or in the store's time once it measured its clock far off)."""
        writes = self.record_writes.get(agent, [])
        index = bisect.bisect_left(writes, (seq, float("-inf"), float("-inf"))) - 1
        return writes[index][2] if index >= 0 else None

    def record_written_at(self, agent: str, seq: int) -> float | None:
        """The store's (true) time of the last write of the agent's record before ``seq``: what
        its last-modified in the listing says."""
        writes = self.record_writes.get(agent, [])
        index = bisect.bisect_left(writes, (seq, float("-inf"), float("-inf"))) - 1
        return writes[index][1] if index >= 0 else None

    def status_at(self, request: str, seq: int) -> StatusWrite | None:
        """The request's status as stored just before ``seq``."""
        found = None
        for write in self.status.get(request, []):
            if write.seq >= seq:
                break
            found = write
        return found
