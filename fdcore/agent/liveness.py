"""Whether the agents that hold requests are lost, and when their statuses may have moved.

**Judged by the listing.** With a store whose listing carries versions
(:class:`fdcore.abc.VersionedListing`) and that reports its time (:class:`fdcore.abc.StoreClock`,
once this agent measured its clock against it), an agent is judged by the **store's**
last-modified time of its record, ``agents/<name>.json``, against the store's time now (this
agent's clock less its measured skew): the holder's clock plays no part, and a heartbeat costs
its readers nothing but the listing. A record is read only:

- when its agent is first met;
- when it changed off its heartbeat's cadence: a heartbeat lands at least ``stale_after / 4``
  after the one before, so a write sooner than that says something new (the agent starts
  stopping or stopped, a new process, an agent of an older release, which writes every poll);
- before its agent is judged lost, if it changed since it was read (its ``stale_after`` may be
  new).

Each holder has an **epoch**, moved when what its statuses say may have moved without it: a new
process, stopping or stopped, an unreadable record, a silence between two versions longer than
its ``stale_after`` (in which another agent could have judged it lost and taken its requests).
A holder alone changes its statuses in flight while it is live, and it hands one back only once
its record says ``stopping``: so a status read under the holder's current epoch, even one whose
etag moved since, gives this agent no work (docs/benchmarks.md, "Cost of a poll").

**Otherwise** each holder's record is read once per sweep (with a versioned listing, only when its
etag moved) and judged by its ``updated_at``, as agents always did, and the epoch moves on what the
record shows.

The takeover policy (:class:`fdcore.abc.TakeoverPolicy`) judges either way: judged by the
listing, it gets the record with ``updated_at`` set to the store's last-modified time of that
version, and ``now`` in the store's time. An agent with no record, or an unreadable one, is
never lost (docs/takeover.md).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from datetime import datetime, timedelta

import attrs

from fdcore.abc import Listed, TakeoverPolicy
from fdcore.agent.skew import ClockSkew
from fdcore.contract.codec import LATEST
from fdcore.contract.limits import HEARTBEAT_SHARE
from fdcore.contract.models import AgentRecord
from fdcore.mailbox.index import MailboxIndex

_ORDER = operator.attrgetter("order")

#: A version this much sooner than a heartbeat's interval (less the store's clock resolution) is
#: off the cadence: its record is read.
CADENCE_SLACK = 0.8


@attrs.define
class Holder:
    """What this agent knows of another agent, judged by the listing."""

    epoch: int = 0
    order: int = 0  # when it was first met, among the holders: judged in this order
    record: AgentRecord | None = None  # as last read
    listed: Listed | None = None  # its version in the last listing
    lost_at: datetime | None = None  # the store's time it was first judged lost (while lost)
    # The requests it may hold that it claimed before ``since`` (the last-modified of the
    # version read before the last): those its records read since then name. Whatever it
    # claimed or took over after ``since`` has a status last written after it. One read back:
    # a claim whose answer the store lost is unknown to its holder until its next look holds
    # it again, so the record it writes meanwhile does not name it.
    requests: set[str] = attrs.field(factory=set)
    since: datetime | None = None
    read_at: datetime | None = None  # the last-modified of the version last read
    read: bool = False  # its record was read once (a read the store failed is tried again)
    # (record, listed, the record as listed): made once per version, not once per judgement
    as_listed: tuple[AgentRecord, Listed, AgentRecord] | None = None
    # (the store's time, record, listed, lost): the last judgement, true while these stay
    judged: tuple[datetime, AgentRecord | None, Listed | None, bool] | None = None
    # (record, listed, until): lost after ``until`` on these (the policy's ``lost_after``), and
    # the same while it was judged not lost (safe)
    until: tuple[AgentRecord, Listed, datetime, float] | None = None
    safe: tuple[AgentRecord, Listed, datetime, float] | None = None
    queued: bool = False  # it has an entry in the heap of times (Liveness._deadlines)

    def record_as_listed(self) -> AgentRecord | None:
        """Its record with ``updated_at`` the store's last-modified of the listed version."""
        record, listed = self.record, self.listed
        if record is None or listed is None:
            return None
        made = self.as_listed
        if made is None or made[0] is not record:
            made = self.as_listed = (
                record,
                listed,
                attrs.evolve(record, updated_at=listed.modified),
            )
        elif made[1] is not listed:
            # A new version of the same record (a heartbeat): the copy is this holder's own.
            object.__setattr__(made[2], "updated_at", listed.modified)  # no validator to run
            made = self.as_listed = (record, listed, made[2])
        return made[2]


class Liveness:
    """Each holder's record and whether it is lost, as one sweep sees them."""

    def __init__(self, index: MailboxIndex, policy: TakeoverPolicy, grace_seconds: float) -> None:
        self.index = index
        self.agents = index.agents
        self.policy = policy
        # The policy's optional ``lost_after(record, grace_seconds)``: the time after which
        # ``is_lost`` holds on ``record`` (docs/plugins.md): then judged by comparing times.
        self._lost_after = getattr(policy, "lost_after", None)
        self.grace = grace_seconds
        self.skew: ClockSkew | None = None  # this agent's clock against the store's
        resolution = getattr(index.mailbox.storage, "clock_resolution", 0.0)
        self.resolution = resolution if isinstance(resolution, float) else 0.0
        self.holders: dict[str, Holder] = {}
        self._followed = 0  # the position in the agents folder's log (Folder.since)
        self._following = False  # the last look followed the listing (by_listing then)
        # Judged by the listing, a sweep judges only the holders that may have become lost:
        # those whose version moved or that were lost, stopping or unjudgeable (due), and
        # those whose time not to be lost (Holder.safe) ran out, from a heap by that time.
        self._met = itertools.count()
        self._due: set[str] = set()
        self._deadlines: list[tuple[float, int, str]] = []  # (POSIX time, order, name)
        self._unread: set[str] = set()  # holders whose record was never read (or failed)
        self._suspects_by_name: set[str] = set()  # holders lost or stopping (suspects)
        # The store's time when this process's first sweep began (it read every status then).
        self.all_read_at: datetime | None = None
        # Not by the listing: each holder's epoch with the record it was judged by.
        self._epochs: dict[str, tuple[int, AgentRecord | None]] = {}
        self._records: dict[str, AgentRecord | None] = {}  # this sweep's (not by the listing)
        self._listed = False  # agents/ listed this sweep
        self._suspects: list[Holder] | None = None  # this sweep's agents lost or stopping
        self._confirmed: dict[str, bool] = {}  # this sweep's still_lost answers
        # Holders whose trusted_epoch may answer otherwise than when last asked, at a time
        # within trusted_until: taken by the sweep (changed_trust), so it asks only those.
        self._trust_changed: set[str] = set()

    def new_sweep(self) -> None:
        self._records.clear()
        self._confirmed.clear()
        self._listed = False
        self._suspects = None

    @property
    def by_listing(self) -> bool:
        """Judged by the listing's last-modified: the listing has versions and the store's
        clock is measured."""
        return self.index.versioned and self.skew is not None and self.skew.seconds is not None

    def store_now(self, now: datetime) -> datetime:
        """``now`` (this agent's clock) in the store's time, by the measured skew."""
        seconds = self.skew.seconds if self.skew is not None else None
        return now - timedelta(seconds=seconds or 0.0)

    # -- by the listing --------------------------------------------------------------------------

    def look(self) -> None:
        """List ``agents/`` once this sweep (when a holder is first judged), and follow each
        agent's versions: read the records that changed off their cadence, move epochs."""
        if self._listed or not self.index.versioned:
            return
        self.agents.refresh()
        self._listed = True
        names, position = self.agents.since(self._followed)
        if not self.by_listing:
            self._followed, self._following = position, False
            return
        listed = self.agents.listed
        if names is None or not self._following:  # the log forgot some: every agent again
            names = list(listed.keys() | self.holders.keys())
        # Only the agents whose listed version changed (or that were read) since the last
        # look, and those whose first read failed: the others' versions did not move.
        for name in sorted({*names, *self._unread}, key=_key):  # in the listing's order
            version = listed.get(name)
            if version is not None:
                self._follow(name, version)
            elif name not in listed:
                self.holders.pop(name, None)
                self._trust_changed.add(name)
                self._unread.discard(name)
                self._suspects_by_name.discard(name)
        # Only now: a read the store failed above ends this look, and the next one follows
        # these names again (moving on first lost the versions of the names after it, and a
        # lost holder went unjudged until its next version: never, once it had crashed).
        self._followed, self._following = position, True

    def _follow(self, name: str, version: Listed) -> None:
        holder = self.holders.get(name)
        if holder is None:
            holder = self.holders[name] = Holder(order=next(self._met))
            self._unread.add(name)
        record, epoch = holder.record, holder.epoch
        if not holder.read:
            self._read(name, holder)  # first met (or its first read failed)
        elif holder.listed is not None and version.etag != holder.listed.etag:
            self._moved(name, holder, version)
        safe = holder.safe
        if safe is not None and version is not safe[1] and version.modified < safe[1].modified:
            self._trust_changed.add(name)  # an earlier version: _judged judges it again
        holder.listed = version
        if holder.record is not record or holder.epoch != epoch or holder.safe is None:
            self._due.add(name)
        # else a heartbeat: a later version of the record judged not lost (_judged)

    def _moved(self, name: str, holder: Holder, version: Listed) -> None:
        """A new version of ``name``'s record: a heartbeat, or something to read."""
        assert holder.listed is not None
        if holder.record is None:
            self._read(name, holder)  # unreadable until now: read every version
            return
        gap = (version.modified - holder.listed.modified).total_seconds()
        stale_after = holder.record.stale_after
        if gap > stale_after:
            holder.epoch += 1  # silent long enough to be taken over meanwhile
            self._trust_changed.add(name)
        elif gap < stale_after * HEARTBEAT_SHARE * CADENCE_SLACK - self.resolution:
            self._read(name, holder)  # sooner than a heartbeat: something new

    def _read(self, name: str, holder: Holder) -> None:
        entry = self.agents.read(name)
        record = entry.value
        before = holder.record
        if record is None or before is None or not _same_live_process(before, record):
            holder.epoch += 1
        named = set(record.requests) if record is not None else set()
        if before is not None and record is not None and _continues(before, record):
            # The same process, heartbeat to heartbeat: what it held at ``since`` (one read
            # back) and still holds its record names.
            holder.requests, holder.since = named, holder.read_at or entry.modified
        elif holder.since is None:
            # First met: what it wrote since this process last read every status may be its.
            since = entry.modified
            if since is not None and self.all_read_at is not None:
                since = min(since, self.all_read_at)
            holder.requests, holder.since = named, since
        else:
            # Another process, or a gap: what the earlier one held may be in neither record.
            holder.requests |= named
        holder.record = record
        holder.read = True
        holder.read_at = entry.modified
        self._unread.discard(name)
        self._review(name, holder)

    def epoch(self, name: str) -> int:
        """The holder's epoch (see the module's docstring)."""
        if self.by_listing:
            self.look()
            holder = self.holders.get(name)
            return holder.epoch if holder is not None else -1
        return self._epochs.get(name, (0, None))[0]

    def record(self, name: str) -> AgentRecord | None:
        """The holder's record as this sweep judges it."""
        if self.by_listing:
            self.look()
            holder = self.holders.get(name)
            return holder.record if holder is not None else None
        return self._record_per_sweep(name)

    def lost(self, name: str, now: datetime) -> bool:
        """Whether ``name`` is lost at ``now`` (this agent's clock)."""
        if not self.by_listing:
            return self.policy.is_lost(self._record_per_sweep(name), now, self.grace)
        self.look()
        holder = self.holders.get(name)
        if holder is None:
            return False
        return self._judged(name, holder, self.store_now(now))

    def _judged(self, name: str, holder: Holder, at: datetime) -> bool:
        """:meth:`lost` at ``at`` (the store's time), judged once per time and version, and not
        at all before the time the policy said it could be lost (``lost_after``)."""
        safe = holder.safe
        listed = holder.listed
        if (
            safe is not None
            and at <= safe[2]
            and safe[0] is holder.record
            and listed is not None
            and (safe[1] is listed or listed.modified >= safe[1].modified)
        ):
            # The same record, judged not lost on this version or an earlier one: a later
            # heartbeat never makes an agent lost sooner (``lost_after``'s promise).
            if holder.lost_at is not None:
                holder.lost_at = None
                self._review(name, holder)
            return False
        judged = holder.judged
        if (
            judged is not None
            and judged[0] == at
            and judged[1] is holder.record
            and judged[2] is holder.listed
        ):
            # Judged already at this time on this version (a sweep asks once per status).
            if not judged[3] and holder.lost_at is not None:
                holder.lost_at = None
                self._review(name, holder)
            return judged[3]
        lost = self._judge(name, holder, at)
        holder.judged = (at, holder.record, holder.listed, lost)
        safe = holder.safe = None if lost else self._safe_until(holder)
        self._review(name, holder)
        if safe is None or holder.lost_at is not None:
            self._due.add(name)  # judged again at the next sweep
        elif not holder.queued:
            heapq.heappush(self._deadlines, (safe[3], holder.order, name))
            holder.queued = True
        return lost

    def _review(self, name: str, holder: Holder) -> None:
        """Keep :attr:`suspects` up to date after ``holder``'s record or judgement changed."""
        self._trust_changed.add(name)
        self._suspects = None
        if _suspect(holder):
            self._suspects_by_name.add(name)
        else:
            self._suspects_by_name.discard(name)

    def _safe_until(self, holder: Holder) -> tuple[AgentRecord, Listed, datetime, float] | None:
        """Until when the policy says ``holder`` cannot be lost on its record as listed (an
        optional ``lost_after(record, grace_seconds)`` of the policy); None when it cannot say."""
        until = holder.until
        if until is None or until[0] is not holder.record or until[1] is not holder.listed:
            return None
        return until

    def still_lost(self, name: str) -> bool:
        """Whether ``name``, judged lost by this sweep's listing of ``agents/``, is still lost
        once the sweep has read the statuses it would take: its record is read again (once a
        sweep), and a version written since the listing says it is alive. An agent writes its
        record before it takes a request over, so a status taken over after the listing was
        made never passes for a lost agent's (judged record by record, the record is read after
        the statuses: nothing to confirm)."""
        if not self.by_listing:
            return True
        if name not in self._confirmed:
            holder = self.holders.get(name)
            entry = self.agents.read(name)
            self._confirmed[name] = (
                holder is not None
                and holder.listed is not None
                and entry.found is not None
                and entry.found.etag == holder.listed.etag
            )
        return self._confirmed[name]

    def _judge(self, name: str, holder: Holder, at: datetime) -> bool:
        """Whether ``holder`` is lost at ``at`` (the store's time)."""
        if not self._lost_by_listing(holder, at):
            holder.lost_at = None
            return False
        if holder.listed is not None and self.agents.changed(name):
            # Changed since it was read: judge the record as it is now (a new stale_after, say).
            self._read(name, holder)
            if not self._lost_by_listing(holder, at):
                return False
        if holder.lost_at is None:
            holder.lost_at = at
        return True

    def _lost_by_listing(self, holder: Holder, at: datetime) -> bool:
        as_listed = holder.record_as_listed()
        if as_listed is None:
            return False  # no record, or an unreadable one: never lost
        if self._lost_after is None:
            return self.policy.is_lost(as_listed, at, self.grace)
        until = self._lost_after(as_listed, self.grace)
        assert holder.record is not None and holder.listed is not None
        holder.until = (holder.record, holder.listed, until, until.timestamp())
        return bool(at > until)  # lost_after is optional: typed Any from getattr

    def judge_all(self, now: datetime) -> None:
        """Judge every listed agent (by the listing): which are lost, since when."""
        if self.by_listing:
            self.look()
            at = self.store_now(now)
            due, self._due = self._due, set()
            deadlines = self._deadlines
            at_seconds = at.timestamp()
            while deadlines and deadlines[0][0] < at_seconds:
                _, order, name = heapq.heappop(deadlines)
                holder = self.holders.get(name)
                if holder is None or holder.order != order:
                    continue  # gone since (or met again: its own entry)
                holder.queued = False
                safe = holder.safe
                if safe is not None and safe[3] >= at_seconds:
                    # Judged since on a later version, safe for longer: wait for that.
                    heapq.heappush(deadlines, (safe[3], order, name))
                    holder.queued = True
                else:
                    due.add(name)
            # The others would be judged not lost on what was judged so before (_judged).
            holders = sorted(
                (holder.order, name, holder)
                for name in due
                if (holder := self.holders.get(name)) is not None
            )
            for n, (_, name, holder) in enumerate(holders):
                try:
                    self._judged(name, holder, at)
                except BaseException:
                    # A store error mid-way: those not judged yet are due at the next sweep
                    # (their deadlines left the heap above).
                    self._due.update(name for _, name, _ in holders[n:])
                    raise

    def trusted_epoch(self, name: str, at: datetime, take_over: bool) -> int | None:
        """By the listing, after this sweep's :meth:`look`: ``name``'s epoch, or None if its
        statuses as read are not to be trusted (no readable record, or, with ``take_over``,
        lost at ``at``, the store's time): :meth:`record`, :meth:`lost` and :meth:`epoch` in
        one call."""
        holder = self.holders.get(name)
        if holder is None or holder.record is None:
            return None
        if take_over and self._judged(name, holder, at):
            return None
        return holder.epoch

    def trusted_until(self, name: str, take_over: bool) -> datetime | None:
        """Until when (the store's time) :meth:`trusted_epoch` answers as it just did, unless
        :meth:`changed_trust` names ``name`` first; None if it must be asked again each sweep.
        Without ``take_over`` the answer does not depend on time (:data:`LATEST`); with it, it
        holds while the holder is safe on its record (the first test of :meth:`_judged`)."""
        holder = self.holders.get(name)
        if holder is None or holder.record is None:
            return None
        if not take_over:
            return LATEST
        safe = holder.safe
        if safe is None or safe[0] is not holder.record or holder.lost_at is not None:
            return None
        return safe[2]

    def changed_trust(self) -> set[str]:
        """The holders whose :meth:`trusted_epoch` may have changed since the last call (a
        record read, an epoch moved, a judgement made or undone, a holder gone)."""
        changed, self._trust_changed = self._trust_changed, set()
        return changed

    @property
    def suspects(self) -> list[Holder]:
        """This sweep's agents that are lost or stopping (:meth:`judge_all` first)."""
        if self._suspects is None:
            found = [self.holders[name] for name in self._suspects_by_name]
            self._suspects = sorted(found, key=_ORDER)
        return self._suspects

    def may_hold(self, request_id: str, modified: datetime) -> bool:
        """Whether a status this agent never read, last written at ``modified`` (the store's
        time), may be one it has to look at: held by an agent that is lost or stopping."""
        for holder in self.suspects:
            if request_id in holder.requests:
                return True  # it may be handed back, or taken over
            if holder.lost_at is not None and self._in_lost_window(holder, request_id, modified):
                return True
        return False

    def _in_lost_window(self, holder: Holder, request_id: str, modified: datetime) -> bool:
        """A lost holder held the requests its records name (:attr:`Holder.requests`), and
        whichever it claimed or took over after ``since``: even after it was judged lost (a
        process paused in the middle of a poll goes on with it when it wakes). A record too
        large to name them (its ids left out, ``running`` kept) leaves every status. A holder
        that stopped cleanly holds nothing."""
        record = holder.record
        assert record is not None
        if record.stopped_at is not None:
            return False
        if holder.since is None or (not record.requests and record.running > 0):
            return True
        return holder.since <= modified

    # -- record by record (no versions or no store clock) ----------------------------------------

    def _record_per_sweep(self, name: str) -> AgentRecord | None:
        """The holder's record, read once per sweep (only when its etag moved, with versions);
        moves its epoch on what it shows."""
        if name in self._records:
            return self._records[name]
        self.look()
        record = self._records[name] = self.agents.get(name).value
        epoch, before = self._epochs.get(name, (0, None))
        if record is None or before is None or not _continues(before, record):
            epoch += 1
        self._epochs[name] = (epoch, record)
        return record


def _key(name: str) -> str:
    return f"{name}.json"


def _suspect(holder: Holder) -> bool:
    """An agent whose statuses may give work: lost, or stopping (it hands requests back)."""
    record = holder.record
    if record is None:
        return False
    return holder.lost_at is not None or record.stopping or record.stopped_at is not None


def _same_live_process(before: AgentRecord, after: AgentRecord) -> bool:
    return (
        after.instance is not None
        and after.instance == before.instance
        and not after.stopping
        and after.stopped_at is None
    )


def _continues(before: AgentRecord, after: AgentRecord) -> bool:
    """``after`` is the same live process's record as ``before``, not silent for longer than its
    ``stale_after`` in between (a later version, at most that much later), neither stopping nor
    stopped."""
    gap = (after.updated_at - before.updated_at).total_seconds()
    return _same_live_process(before, after) and 0 <= gap <= after.stale_after
