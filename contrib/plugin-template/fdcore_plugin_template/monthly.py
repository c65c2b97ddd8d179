"""The ``monthly`` slot function: ``monthly = "1 02:00"``, due on that day of every month at that
time, in the schedule's ``timezone`` (default UTC), open for ``deadline`` (default 6h).

Days run 1 to 28 only, so every month has the day: a schedule is due every month, never skipping
one. A local time the clock skips (the spring change) is due as many minutes after the change as
it was meant to be after it (02:30 becomes 03:30); a time that happens twice is due the first time.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from fdcore.abc import Slot
from fdcore.durations import format_duration, parse_duration
from fdcore.errors import DurationError

UTC = timezone.utc
DEFAULT_DEADLINE = timedelta(hours=6)
LONGEST_DEADLINE = timedelta(days=28)  # the shortest month: the next slot is due no sooner
_SPEC = re.compile(r"(\d{1,2})\s+(\d{1,2}):(\d{2})")


@attrs.frozen
class MonthlyTimetable:
    """Due at ``hour:minute`` on ``day`` of every month in ``zone``."""

    day: int
    hour: int
    minute: int
    zone: ZoneInfo
    deadline: timedelta

    def latest_due(self, now: datetime) -> Slot | None:
        now = _utc(now)
        local = now.astimezone(self.zone)
        due = self._due(local.year, local.month)
        if due > now:
            due = self._due(*_previous(local.year, local.month))
        return self._slot(due)

    def next_due(self, now: datetime) -> Slot:
        now = _utc(now)
        local = now.astimezone(self.zone)
        due = self._due(local.year, local.month)
        if due <= now:
            due = self._due(*_next(local.year, local.month))
        return self._slot(due)

    def describe(self) -> str:
        when = f"{self.day} {self.hour:02d}:{self.minute:02d} {self.zone.key}"
        return f"monthly {when} deadline {format_duration(self.deadline.total_seconds())}"

    def _due(self, year: int, month: int) -> datetime:
        wall = datetime(year, month, self.day, self.hour, self.minute, tzinfo=self.zone)
        return wall.astimezone(UTC)

    def _slot(self, due: datetime) -> Slot:
        return Slot(f"{due:%Y%m%dT%H%M}", due, due + self.deadline)


class Monthly:
    """Parses ``monthly = "DAY HH:MM"``."""

    name = "monthly"  # the schedule key it answers

    def parse(self, spec: str, options: dict[str, Any]) -> MonthlyTimetable:
        match = _SPEC.fullmatch(spec.strip()) if isinstance(spec, str) else None
        if match is None:
            raise _error("monthly", spec, 'use DAY HH:MM, like "1 02:00"')
        day, hour, minute = (int(group) for group in match.groups())
        if not 1 <= day <= 28:
            raise _error("monthly", spec, f"day {day} is out of range (1-28: every month has it)")
        if hour > 23:
            raise _error("monthly", spec, f"hour {hour} is out of range (00-23)")
        if minute > 59:
            raise _error("monthly", spec, f"minute {minute} is out of range (00-59)")
        return MonthlyTimetable(day, hour, minute, _zone(options), _deadline(options))


def _error(key: str, value: object, reason: str) -> ValueError:
    """A one-line error that starts with the setting as written in agent.toml."""
    return ValueError(f"{key} = {json.dumps(value, default=str)}: {reason}")


def _zone(options: dict[str, Any]) -> ZoneInfo:
    name = options.get("timezone", "UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        reason = 'unknown time zone (use an IANA name like "Europe/Berlin")'
        raise _error("timezone", name, reason) from None


def _deadline(options: dict[str, Any]) -> timedelta:
    raw = options.get("deadline")
    if raw is None:
        return DEFAULT_DEADLINE
    try:
        deadline = timedelta(seconds=parse_duration(raw))
    except DurationError as exc:
        raise _error("deadline", raw, exc.reason) from None
    if not timedelta(0) < deadline <= LONGEST_DEADLINE:
        raise _error("deadline", raw, "must be more than 0s and at most 28d (the next slot's due)")
    return deadline


def _utc(now: datetime) -> datetime:
    if now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got naive {now.isoformat()}")
    return now.astimezone(UTC)


def _previous(year: int, month: int) -> tuple[int, int]:
    return (year - 1, 12) if month == 1 else (year, month - 1)


def _next(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)
