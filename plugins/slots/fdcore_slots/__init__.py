"""fdcore-slots: when a schedule is due (``every``, ``cron``, ``daily``, ``weekly``) and what its
slots are called. See docs/schedules.md."""

from fdcore_slots.interval import Every, IntervalTimetable
from fdcore_slots.local import Cron, Daily, Weekly
from fdcore_slots.wallclock import WallClockTimetable

__all__ = ["Cron", "Daily", "Every", "IntervalTimetable", "WallClockTimetable", "Weekly"]
