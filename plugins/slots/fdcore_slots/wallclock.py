"""Timings on a local wall clock (cron, daily, weekly), and the daylight-saving rules.

A schedule's due times are wall-clock minutes in its time zone, found with a cron expression on
naive local times; each is then placed on the UTC time line:

- a wall time that happens twice (the clock goes back) is due once, at its first occurrence;
- a wall time that does not exist (the clock jumps forward over it) is due once, at the first
  instant after the jump. Several skipped wall times all land there and make one slot.

The mapping from wall times to UTC never goes backwards, so due times (and the slot ids made from
them) rise strictly, across change days too.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import attrs

from fdcore.abc import Slot
from fdcore_slots.common import EPOCH, UTC, as_utc
from fdcore_slots.cron import CronSchedule

_TICK = timedelta(microseconds=1)


@attrs.frozen
class WallClockTimetable:
    """Due at the wall times of a cron ``schedule`` in ``zone``."""

    schedule: CronSchedule
    zone: ZoneInfo
    text: str  # what describe() returns
    deadline: timedelta | None = None  # after due time; None: the next slot's due time

    def latest_due(self, now: datetime) -> Slot | None:
        wall = self.schedule.latest_at(self._bound(as_utc(now)))
        return None if wall is None else self._slot(self._instant(wall))

    def next_due(self, now: datetime) -> Slot:
        return self._slot(self._next_instant(as_utc(now)))

    def describe(self) -> str:
        return self.text

    def _slot(self, due: datetime) -> Slot:
        deadline = due + self.deadline if self.deadline else self._next_instant(due)
        return Slot(slot_id(due), due, deadline)

    def _next_instant(self, now: datetime) -> datetime:
        wall = self.schedule.next_after(self._bound(now))
        if wall is None:
            raise ValueError(f"{self.text}: no due time after {now.isoformat()} before year 10000")
        return self._instant(wall)

    def _bound(self, now: datetime) -> datetime:
        """The latest wall time whose due instant is at or before ``now`` (UTC).

        Usually ``now`` on the local clock. In the second pass of a repeated hour, though, every
        wall time up to the end of that hour was already due in its first pass.
        """
        local = now.astimezone(self.zone)
        first_offset = _offset(local.replace(fold=0))
        offset = _offset(local)
        if local.fold == 1 and first_offset != offset:
            turn = _transition(self.zone, now - (first_offset - offset), now)
            return turn.replace(tzinfo=None) + first_offset - _TICK
        return local.replace(tzinfo=None)

    def _instant(self, wall: datetime) -> datetime:
        """The UTC instant a wall time is due: its first occurrence, or the end of its gap."""
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        if first.astimezone(self.zone).replace(tzinfo=None) == wall:
            return first
        # In a gap, fold=0 reads the wall with the offset from before the jump (an instant
        # after it) and fold=1 with the offset from after (an instant before it).
        before = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        return _transition(self.zone, before, first)


def slot_id(due: datetime) -> str:
    """``YYYYMMDDTHHMM`` of the UTC due time (``SS`` added only when its seconds are not 0)."""
    text = f"{due.year:04d}{due.month:02d}{due.day:02d}T{due.hour:02d}{due.minute:02d}"
    return text + f"{due.second:02d}" if due.second else text


def _offset(local: datetime) -> timedelta:
    return local.utcoffset() or timedelta(0)


def _transition(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first whole-second instant in ``(before, after]`` with ``after``'s UTC offset.

    zoneinfo does not expose its transitions, so find the one between two instants whose offsets
    differ by bisection (tz data changes offsets on whole seconds).
    """
    target = _offset(after.astimezone(zone))
    low = int((before - EPOCH) // timedelta(seconds=1))
    high = -int((EPOCH - after) // timedelta(seconds=1))  # ceiling
    while high - low > 1:
        middle = (low + high) // 2
        if _offset((EPOCH + timedelta(seconds=middle)).astimezone(zone)) == target:
            high = middle
        else:
            low = middle
    return EPOCH + timedelta(seconds=high)
