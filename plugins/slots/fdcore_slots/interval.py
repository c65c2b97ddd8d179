"""``every = "15m"``: fixed intervals counted from the Unix epoch, the same on every agent.

Slot ``n`` is due at ``n * interval`` seconds after 1970-01-01 UTC, so an agent finds its slot
number as ``floor(epoch_seconds / interval)`` from its own clock, with no state and no zone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs

from fdcore.abc import Slot
from fdcore.durations import format_duration
from fdcore_slots.common import (
    EPOCH,
    as_utc,
    duration_setting,
    refuse_options,
    require_text,
    spec_error,
)

MAX_INTERVAL = 3650 * 86400


@attrs.frozen
class IntervalTimetable:
    """Slots every ``seconds`` seconds; a slot's deadline is the next slot's due time."""

    seconds: int

    def _number(self, now: datetime) -> int:
        # timedelta // timedelta is exact integer arithmetic in microseconds: no float rounding
        # can put two agents reading the same instant in different slots.
        return (as_utc(now) - EPOCH) // timedelta(seconds=self.seconds)

    def _slot(self, number: int) -> Slot:
        due = EPOCH + timedelta(seconds=number * self.seconds)
        return Slot(str(number), due, due + timedelta(seconds=self.seconds))

    def latest_due(self, now: datetime) -> Slot | None:
        number = self._number(now)
        return self._slot(number) if number >= 0 else None

    def next_due(self, now: datetime) -> Slot:
        return self._slot(max(self._number(now) + 1, 0))

    def describe(self) -> str:
        return f"every {self.seconds}s"


class Every:
    """The ``every`` slot function."""

    name = "every"

    def parse(self, spec: str, options: dict[str, Any]) -> IntervalTimetable:
        text = require_text(self.name, spec, "15m")
        refuse_options(
            self.name,
            options,
            {
                "timezone": "their slots count from 1970-01-01 UTC; "
                "use daily, weekly or cron for local times",
                "deadline": "a slot's deadline is the next slot's due time",
            },
        )
        seconds = duration_setting(self.name, text)
        if seconds <= 0:
            raise spec_error(self.name, text, "must be more than 0s")
        if seconds > MAX_INTERVAL:
            # slot due times must stay within the dates Python can hold (year 9999)
            raise spec_error(
                self.name, text, f"must be at most {format_duration(MAX_INTERVAL)} (ten years)"
            )
        if seconds != int(seconds):
            raise spec_error(self.name, text, "must be a whole number of seconds")
        return IntervalTimetable(int(seconds))
