"""Whether the agents that hold requests are lost: judged once per sweep, from the listing.

With a store whose listing carries versions (:class:`fdcore.abc.VersionedListing`) and that
reports its time (:class:`fdcore.abc.StoreClock`, once this agent measured its clock against it),
an agent is judged by the **store's** last-modified time of its record, ``agents/<name>.json``,
against the store's time now (this agent's clock less its measured skew): the holder's clock
plays no part, and a heartbeat costs its readers nothing but the listing. The record itself is
read when the holder is first met, when a status it holds changed (it may have restarted), and
before it is judged lost if it changed since it was read (its ``stale_after`` may be new): so an
idle sweep costs one listing of ``agents/``, whatever the fleet's size.

Otherwise each holder's record is read once per sweep (with a versioned listing, only when its
etag moved) and judged by its ``updated_at``, as agents always did.

The takeover policy (:class:`fdcore.abc.TakeoverPolicy`) judges either way: judged by the
listing, it gets the record with ``updated_at`` set to the store's last-modified time of that
version, and ``now`` in the store's time. An agent with no record, or an unreadable one, is
never lost (docs/takeover.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from fdcore.abc import TakeoverPolicy
from fdcore.agent.skew import ClockSkew
from fdcore.contract.models import AgentRecord
from fdcore.mailbox.index import MailboxIndex


class Liveness:
    """Each holder's record and whether it is lost, as one sweep sees them."""

    def __init__(self, index: MailboxIndex, policy: TakeoverPolicy, grace_seconds: float) -> None:
        self.index = index
        self.agents = index.agents
        self.policy = policy
        self.grace = grace_seconds
        self.skew: ClockSkew | None = None  # this agent's clock against the store's
        self._records: dict[str, AgentRecord | None] = {}  # this sweep's
        self._listed = False  # agents/ listed this sweep
        # Each holder's epoch, moved when its record shows something that may have moved its
        # statuses (another process, stopping, stopped, unreadable, a silence past stale_after);
        # with the record it was judged by. Used where statuses carry no etags in the listing.
        self.epochs: dict[str, tuple[int, AgentRecord | None]] = {}

    def new_sweep(self) -> None:
        self._records.clear()
        self._listed = False

    @property
    def by_listing(self) -> bool:
        """Judged by the listing's last-modified: the listing has versions and the store's
        clock is measured."""
        return self.index.versioned and self.skew is not None and self.skew.seconds is not None

    def _list(self) -> None:
        if not self._listed and self.index.versioned:
            self.agents.list()  # one listing per sweep, and only when a holder is judged
            self._listed = True

    def record(self, holder: str) -> AgentRecord | None:
        """The holder's record this sweep (see the module's docstring for when it is read)."""
        if holder in self._records:
            return self._records[holder]
        self._list()
        if self.by_listing:
            entry = self.agents.known(holder)
            if entry is None and holder in self.agents.listed:
                entry = self.agents.read(holder)  # first met
            record = entry.value if entry is not None and holder in self.agents.listed else None
        else:
            record = self.agents.get(holder).value
        self._records[holder] = record
        self._move_epoch(holder, record)
        return record

    def refresh(self, holder: str) -> None:
        """A status ``holder`` holds changed: read its record again if that changed too."""
        if self.by_listing and holder not in self._records:
            self._list()
            if holder in self.agents.listed and self.agents.changed(holder):
                self.agents.read(holder)

    def lost(self, holder: str, now: datetime) -> bool:
        """Whether ``holder`` is lost at ``now`` (this agent's clock)."""
        record = self.record(holder)
        if not self.by_listing:
            return self.policy.is_lost(record, now, self.grace)
        if not self._lost_by_listing(holder, record, now):
            return False
        if not self.agents.changed(holder):
            return True
        # Changed since it was read: judge the record as it is now (a new stale_after, say).
        self._records[holder] = record = self.agents.read(holder).value
        return self._lost_by_listing(holder, record, now)

    def _lost_by_listing(self, holder: str, record: AgentRecord | None, now: datetime) -> bool:
        listed = self.agents.listed.get(holder)
        if record is None or listed is None:
            return False  # no record, or an unreadable one: never lost
        assert self.skew is not None and self.skew.seconds is not None
        store_now = now - timedelta(seconds=self.skew.seconds)
        as_listed = attrs.evolve(record, updated_at=listed.modified)
        return self.policy.is_lost(as_listed, store_now, self.grace)

    def epoch(self, holder: str) -> int:
        return self.epochs.get(holder, (0, None))[0]

    def _move_epoch(self, holder: str, record: AgentRecord | None) -> None:
        epoch, before = self.epochs.get(holder, (0, None))
        if record is None or before is None or not _continues(before, record):
            epoch += 1
        self.epochs[holder] = (epoch, record)


def _continues(before: AgentRecord, after: AgentRecord) -> bool:
    """``after`` is the same live process's record as ``before``, not silent for longer than its
    ``stale_after`` in between (a later version, at most that much later), neither stopping nor
    stopped."""
    gap = (after.updated_at - before.updated_at).total_seconds()
    return (
        after.instance is not None
        and after.instance == before.instance
        and not after.stopping
        and after.stopped_at is None
        and 0 <= gap <= after.stale_after
    )
