"""Slot functions on a local wall clock: ``cron``, ``daily`` and ``weekly``.

Daily and weekly timings are turned into cron expressions, so all three share one timetable and
one set of daylight-saving rules (:mod:`fdcore_slots.wallclock`).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from fdcore.durations import format_duration
from fdcore_slots.common import (
    duration_setting,
    refuse_options,
    require_text,
    spec_error,
    zone_option,
)
from fdcore_slots.cron import DAYS, CronError, parse_cron
from fdcore_slots.wallclock import WallClockTimetable

FULL_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{2})")  # ASCII digits only: \d matches any script's
DAY = timedelta(days=1)
DEFAULT_DEADLINE = 6 * 3600


class Cron:
    """The ``cron`` slot function: a 5-field expression (or a macro such as ``@daily``) read as
    Vixie cron reads it (:mod:`fdcore_slots.cron`), in the schedule's time zone."""

    name = "cron"

    def parse(self, spec: str, options: dict[str, Any]) -> WallClockTimetable:
        text = require_text(self.name, spec, "0 2 * * *")
        refuse_options(
            self.name, options, {"deadline": "a slot's deadline is the next slot's due time"}
        )
        zone = zone_option(options)
        if not text.isascii():
            raise spec_error(self.name, text, "only ASCII digits, names and * , - / are allowed")
        try:
            schedule = parse_cron(text)
        except CronError as exc:
            raise spec_error(self.name, text, str(exc)) from None
        return WallClockTimetable(schedule, zone, schedule.describe(zone.key))


class Daily:
    """The ``daily`` slot function: ``daily = "02:00"``, due every day at that local time."""

    name = "daily"

    def parse(self, spec: str, options: dict[str, Any]) -> WallClockTimetable:
        text = require_text(self.name, spec, "02:00")
        hour, minute = _parse_time(self.name, text, text.strip())
        when = f"{hour:02d}:{minute:02d}"
        return _calendar_timetable(self.name, f"{minute} {hour} * * *", when, DAY, options)


class Weekly:
    """The ``weekly`` slot function: ``weekly = "mon 02:00"``, due every week on that day."""

    name = "weekly"

    def parse(self, spec: str, options: dict[str, Any]) -> WallClockTimetable:
        text = require_text(self.name, spec, "mon 02:00")
        parts = text.split()
        if len(parts) != 2:
            raise spec_error(self.name, text, 'use DAY HH:MM, like "mon 02:00"')
        day_name, time_text = parts
        lowered = day_name.lower()
        if lowered in DAYS:
            day = DAYS.index(lowered)
        elif lowered in FULL_DAYS:
            day = FULL_DAYS.index(lowered)
        else:
            raise spec_error(
                self.name, text, f"unknown day {day_name!r} (use {', '.join(DAYS[1:] + DAYS[:1])})"
            )
        hour, minute = _parse_time(self.name, text, time_text)
        return _calendar_timetable(
            self.name,
            f"{minute} {hour} * * {day}",
            f"{DAYS[day]} {hour:02d}:{minute:02d}",
            7 * DAY,
            options,
        )


def _parse_time(key: str, spec: str, text: str) -> tuple[int, int]:
    match = _TIME.fullmatch(text)
    if match is None:
        raise spec_error(key, spec, f'bad time {text!r} (use HH:MM, like "02:00")')
    hour, minute = int(match[1]), int(match[2])
    if hour > 23:
        raise spec_error(key, spec, f"hour {hour} is out of range (00-23)")
    if minute > 59:
        raise spec_error(key, spec, f"minute {minute} is out of range (00-59)")
    return hour, minute


def _calendar_timetable(
    key: str, expression: str, when: str, period: timedelta, options: dict[str, Any]
) -> WallClockTimetable:
    """A daily or weekly timetable: due at ``expression``, open for ``deadline`` (default 6h)."""
    zone = zone_option(options)
    raw = options.get("deadline")
    seconds = DEFAULT_DEADLINE if raw is None else duration_setting("deadline", raw)
    if seconds <= 0:
        raise spec_error("deadline", raw, "must be more than 0s")
    if seconds > period.total_seconds():
        raise spec_error(
            "deadline",
            raw,
            f"must be at most {format_duration(period.total_seconds())} for a {key} schedule "
            "(the next slot would be due before it ends)",
        )
    text = f"{key} {when} {zone.key} deadline {format_duration(seconds)}"
    return WallClockTimetable(parse_cron(expression), zone, text, timedelta(seconds=seconds))
