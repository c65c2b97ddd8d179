"""Slot functions on a local wall clock: ``cron``, ``daily`` and ``weekly``.

Daily and weekly timings are turned into cron expressions, so all three share one timetable and
one set of daylight-saving rules (:mod:`fdcore_slots.wallclock`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from croniter import CroniterBadDateError, CroniterError, croniter

from fdcore.durations import format_duration
from fdcore_slots.common import (
    duration_setting,
    refuse_options,
    require_text,
    spec_error,
    zone_option,
)
from fdcore_slots.wallclock import WallClockTimetable

CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# cron numbers days from Sunday = 0
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FULL_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
MONTH_FIELD, DAY_OF_WEEK_FIELD = 3, 4
_NAMES = {MONTH_FIELD: MONTHS, DAY_OF_WEEK_FIELD: DAYS}
_FIELD = re.compile(r"[0-9A-Za-z*,/-]+")
_RANGE = re.compile(r"([0-9A-Za-z]+)-([0-9A-Za-z]+)(?:/\d+)?")
_TIME = re.compile(r"(\d{1,2}):(\d{2})")
DAY = timedelta(days=1)
DEFAULT_DEADLINE = 6 * 3600


class Cron:
    """The ``cron`` slot function: a standard 5-field expression in the schedule's time zone."""

    name = "cron"

    def parse(self, spec: str, options: dict[str, Any]) -> WallClockTimetable:
        text = require_text(self.name, spec, "0 2 * * *")
        refuse_options(
            self.name, options, {"deadline": "a slot's deadline is the next slot's due time"}
        )
        zone = zone_option(options)
        expression = " ".join(text.split())
        _check_cron_syntax(text, expression)
        try:
            cron = croniter(expression, datetime(2000, 1, 1))
            cron.get_next(datetime)
        except CroniterBadDateError:
            raise spec_error(self.name, text, "never due (no such date)") from None
        except CroniterError as exc:
            raise spec_error(self.name, text, _cron_problem(expression, exc)) from None
        # croniter's expansion is the canonical form: "0 2 * * mon" and "0 02 * * 1" read alike
        canonical = " ".join(_compact(field) for field in cron.expanded)
        return WallClockTimetable(expression, zone, f"cron {canonical} {zone.key}")


def _check_cron_syntax(spec: str, expression: str) -> None:
    """Only standard cron: croniter's extensions (seconds, L, #, random R and hashed H fields)
    could make agents disagree or hide a difference from the schedule's fingerprint."""
    fields = expression.split(" ") if expression else []
    if len(fields) != len(CRON_FIELDS):
        extra = " (seconds are not supported)" if len(fields) == 6 else ""
        raise spec_error(
            Cron.name,
            spec,
            f"need 5 fields ({' '.join(CRON_FIELDS)}), got {len(fields)}{extra}",
        )
    for index, field in enumerate(fields):
        names = _NAMES.get(index, ())
        words = re.findall(r"[A-Za-z]+", field)
        unknown = [word for word in words if word.lower() not in names]
        hint = f"use numbers{f', names {names[0]}..{names[-1]}' if names else ''}, *, "
        hint += "ranges a-b, steps /n and lists a,b"
        if not _FIELD.fullmatch(field) or unknown:
            what = repr(unknown[0]) if unknown else repr(field)
            raise spec_error(
                Cron.name, spec, f"{what} not allowed in the {CRON_FIELDS[index]} field ({hint})"
            )
        for item in field.split(","):
            bounds = _RANGE.fullmatch(item)
            if bounds and _value(index, bounds[1]) == _value(index, bounds[2]):
                # croniter reads a range from a value to itself as the whole field ("5-5" as
                # every minute), unlike cron: refuse it rather than run far more often.
                raise spec_error(
                    Cron.name,
                    spec,
                    f"range {item!r} in the {CRON_FIELDS[index]} field starts and ends on the "
                    f"same value: write {bounds[1]!r} alone",
                )


def _compact(values: list[Any]) -> str:
    """A field's expanded values as text, runs of three or more written as ranges (``1-5``)."""
    if values == ["*"]:
        return "*"
    numbers: list[int] = sorted(values)
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ",".join(
        f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)) for run in runs
    )


def _value(index: int, token: str) -> int:
    """A cron field value as a number (month and day names to theirs)."""
    names = _NAMES.get(index, ())
    lowered = token.lower()
    if lowered in names:
        return names.index(lowered) + (1 if index == MONTH_FIELD else 0)
    return int(token)


def _cron_problem(expression: str, error: CroniterError) -> str:
    """What croniter refused, naming the first field that croniter refuses on its own."""
    fields = expression.split(" ")
    for index, field in enumerate(fields):
        alone = ["*"] * len(fields)
        alone[index] = field
        try:
            croniter(" ".join(alone))
        except CroniterError as exc:
            return f"bad {CRON_FIELDS[index]} field {field!r}: {_croniter_reason(exc)}"
    return f"bad cron expression: {_croniter_reason(error)}"


def _croniter_reason(error: CroniterError) -> str:
    # croniter says "[<expression>] is not acceptable, out of range": keep what follows
    reason = str(error).split("is not acceptable", 1)[-1].strip(" ,")
    return reason or "not acceptable"


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
    return WallClockTimetable(expression, zone, text, timedelta(seconds=seconds))
