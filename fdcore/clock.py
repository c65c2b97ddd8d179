"""Time, injected: the agent asks a clock, so the simulator can drive it with virtual time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""


class SystemClock:
    """The machine's clock, optionally skewed (tests of agents whose clocks differ)."""

    def __init__(self, skew_seconds: float = 0.0) -> None:
        self.skew = timedelta(seconds=skew_seconds)

    def now(self) -> datetime:
        return datetime.now(timezone.utc) + self.skew


class ManualClock:
    """A clock that moves only when told to (unit tests and the simulator)."""

    def __init__(self, start: datetime, skew_seconds: float = 0.0) -> None:
        self.time = start
        self.skew = timedelta(seconds=skew_seconds)

    def now(self) -> datetime:
        return self.time + self.skew

    def advance(self, seconds: float) -> None:
        self.time += timedelta(seconds=seconds)
