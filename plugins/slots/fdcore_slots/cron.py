"""Cron expressions read as Vixie cron reads them, and the wall times they are due at.

The reference is Vixie cron as Debian and cronie ship it (what "cron" means on a Linux host and
in a Kubernetes CronJob), and cronsim, which follows it, is the executable reference the tests
compare against:

- five fields: minute, hour, day of month, month, day of week; names ``jan``..``dec`` and
  ``sun``..``sat`` in the last two, in any case; day of week 0 and 7 are both Sunday;
- items ``*``, ``a``, ``a-b`` with ``a <= b`` (a range never wraps around), each with an optional
  step ``/n``; ``a/n`` is ``a-<last>/n`` (so ``1/6`` in day of week is Monday and Sunday, 7);
- the day rule: when the day-of-month or the day-of-week field **starts with** ``*``, a day must
  match both; otherwise it matches when either does (``0 0 */2 * 1`` is odd-numbered Mondays,
  ``0 0 1,15 * 1`` is the 1st, the 15th and every Monday);
- the macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``)
  and ``@hourly``.

Parsing raises :class:`CronError` with a one-line reason; the caller adds the setting.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta

import attrs


class CronError(ValueError):
    """A cron expression cron itself would refuse; the message is the reason, on one line."""


@attrs.frozen
class Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low_name + i
    first_name: int = 0  # the value of names[0]

    def value(self, token: str) -> int:
        lowered = token.lower()
        if lowered in self.names:
            return self.names.index(lowered) + self.first_name
        number = _whole_number(token)
        if number is None:
            raise CronError(f"{token!r} is not a number{self._name_hint()}")
        if not self.low <= number <= self.high:
            raise CronError(f"{token} is out of range ({self.low}-{self.high})")
        return number

    def _name_hint(self) -> str:
        if not self.names:
            return ""
        return f" or a name ({self.names[0]}..{self.names[-1]})"


MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron numbers days from Sunday = 0
FIELDS = (
    Field("minute", 0, 59),
    Field("hour", 0, 23),
    Field("day-of-month", 1, 31),
    Field("month", 1, 12, MONTHS, 1),
    # 7 is Sunday too: kept through steps (``1/6`` reaches it), folded to 0 after
    Field("day-of-week", 0, 7, DAYS, 0),
)
MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK = FIELDS
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_CHARACTERS = re.compile(r"[0-9A-Za-z*,/-]+")
_ITEM = re.compile(r"(?P<start>[^-/]+)(?:-(?P<end>[^-/]+))?(?:/(?P<step>[^-/]*))?")
# the longest a due day can be away: the calendar repeats every 400 years
_HORIZON = timedelta(days=146097)


def parse_field(field: Field, text: str) -> frozenset[int]:
    """The values of one field; a CronError names the field and what is wrong with it."""
    words = re.findall(r"[A-Za-z]+", text)
    unknown = [word for word in words if word.lower() not in field.names]
    if not _CHARACTERS.fullmatch(text) or unknown:
        # extensions of other crons (L, W, #, ?, H, R) end here, named
        names = f", names {field.names[0]}..{field.names[-1]}" if field.names else ""
        raise CronError(
            f"{unknown[0] if unknown else text!r} not allowed in the {field.name} field "
            f"(use numbers{names}, *, ranges a-b, steps /n and lists a,b)"
        )
    values: set[int] = set()
    for item in text.split(","):
        try:
            values.update(_item_values(field, item))
        except CronError as exc:
            raise CronError(f"bad {field.name} field {text!r}: {exc}") from None
    return frozenset(values)


def _item_values(field: Field, item: str) -> range:
    if not item:
        raise CronError("empty list item")
    match = _ITEM.fullmatch(item)
    if match is None:
        raise CronError(f"{item!r} is not a value, a range a-b or a step /n")
    start_text, end_text, step_text = match["start"], match["end"], match["step"]
    if start_text == "*":
        if end_text is not None:
            raise CronError("* cannot start a range")
        start, end = field.low, field.high
    else:
        start = field.value(start_text)
        # "a/n" runs from a to the end of the field, as in Debian cron and cronie
        end = start if end_text is None and step_text is None else field.high
        if end_text is not None:
            end = field.value(end_text)
            if end < start:
                raise CronError(
                    f"range {item!r} ends before it starts (cron ranges do not wrap around: "
                    "write two ranges)"
                )
    step = 1 if step_text is None else _whole_number(step_text)
    if step is None or step < 1:
        raise CronError(f"step {step_text!r} in {item!r} must be a whole number from 1")
    return range(start, end + 1, step)


def _whole_number(text: str) -> int | None:
    """ASCII digits as a number (None if not); past nine digits, 10**9: any field's values
    are far below, and int() refuses texts of thousands of digits."""
    if not text.isascii() or not text.isdigit():
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 9 else 10**9


@attrs.frozen
class CronSchedule:
    """The due wall minutes of a parsed cron expression, on naive (local) date-times."""

    minutes: tuple[int, ...]  # sorted
    hours: tuple[int, ...]  # sorted
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6
    days_and: bool  # a day must match both day fields (one of them starts with *)

    def describe(self, zone: str) -> str:
        """The canonical text: equal for expressions due at the same wall times in ``zone``."""
        days, weekdays = _compact(self.days, DAY_OF_MONTH), _compact(self.weekdays, DAY_OF_WEEK)
        if self.days_and:
            both = days != "*" and weekdays != "*"
        else:  # either field matching all days makes every day due
            both = False
            if "*" in (days, weekdays):
                days = weekdays = "*"
        fields = [
            _compact(self.minutes, MINUTE),
            _compact(self.hours, HOUR),
            days,
            _compact(self.months, MONTH),
            weekdays,
        ]
        # "1-7 * 1" is written alike for the two day rules: say which one it is
        return f"cron {' '.join(fields)} {zone}" + (", days matching both" if both else "")

    def due_on(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.weekday() + 1) % 7 in self.weekdays
        return in_days and in_weekdays if self.days_and else in_days or in_weekdays

    def next_after(self, wall: datetime) -> datetime | None:
        """The first due wall minute after ``wall``; None if there is none before year 10000."""
        day = wall.date()
        if self.due_on(day):
            for hour in self.hours:
                for minute in self.minutes:
                    if (hour, minute) > (wall.hour, wall.minute):
                        return datetime.combine(day, time(hour, minute))
        for later in self._days(day, 1):
            return datetime.combine(later, time(self.hours[0], self.minutes[0]))
        return None

    def latest_at(self, wall: datetime) -> datetime | None:
        """The last due wall minute at or before ``wall``; None if there is none since year 1."""
        day = wall.date()
        if self.due_on(day):
            for hour in reversed(self.hours):
                for minute in reversed(self.minutes):
                    if (hour, minute) <= (wall.hour, wall.minute):
                        return datetime.combine(day, time(hour, minute))
        for earlier in self._days(day, -1):
            return datetime.combine(earlier, time(self.hours[-1], self.minutes[-1]))
        return None

    def _days(self, start: date, direction: int) -> Iterator[date]:
        """Due days after (``direction`` 1) or before (-1) ``start``, up to 400 years away."""
        step = timedelta(days=direction)
        edge = date.max if direction > 0 else date.min
        try:
            limit = start + direction * _HORIZON
        except OverflowError:
            limit = edge
        day = start
        while day != edge and (limit - day).days * direction > 0:
            day += step
            if day.month not in self.months:
                # to the month's edge, so the next step lands in the month after (or before)
                last = calendar.monthrange(day.year, day.month)[1]
                day = day.replace(day=last if direction > 0 else 1)
            elif self.due_on(day):
                yield day


def parse_cron(text: str) -> CronSchedule:
    """A cron expression (5 fields or a macro) as a schedule; CronError if cron refuses it."""
    fields = text.split()
    if len(fields) == 1 and fields[0].startswith("@"):
        macro = fields[0].lower()
        if macro == "@reboot":
            raise CronError("@reboot is not a time (it runs when cron starts)")
        if macro not in MACROS:
            raise CronError(f"unknown macro {fields[0]!r} (use {', '.join(MACROS)})")
        fields = MACROS[macro].split()
    if len(fields) != len(FIELDS):
        extra = " (seconds are not supported)" if len(fields) == 6 else ""
        names = " ".join(field.name for field in FIELDS)
        raise CronError(f"need 5 fields ({names}), got {len(fields)}{extra}")
    minutes, hours, days, months, weekdays = (
        parse_field(field, value) for field, value in zip(FIELDS, fields, strict=True)
    )
    schedule = CronSchedule(
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=days,
        months=months,
        weekdays=frozenset(day % 7 for day in weekdays),
        days_and=fields[2].startswith("*") or fields[4].startswith("*"),
    )
    if schedule.days_and and not any(
        day <= _longest_month(month) for month in months for day in days
    ):
        raise CronError("never due (no such date)")
    return schedule


def _longest_month(month: int) -> int:
    return calendar.monthrange(2000, month)[1]  # 2000 is a leap year: February has 29 days


def _compact(values: tuple[int, ...] | frozenset[int], field: Field) -> str:
    """A field's values as text, ``*`` for all, runs of three or more as ranges (``1-5``)."""
    high = 6 if field is DAY_OF_WEEK else field.high
    numbers = sorted(values)
    if numbers == list(range(field.low, high + 1)):
        return "*"
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ",".join(
        f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)) for run in runs
    )
