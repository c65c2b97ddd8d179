"""The slot function extension point: when a schedule is due, and what its slot is called.

A slot is named after its **due time in UTC**, never after when an agent noticed it, so agents
whose clocks differ by seconds name the same ``requests/sched-<id>-<slot>.json``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs


@attrs.frozen
class Slot:
    """One due time of a schedule."""

    id: str  # becomes part of a file name: a valid id
    due_at: datetime  # UTC
    deadline: datetime  # UTC; after it the slot's request is not created, an unclaimed one expires


@runtime_checkable
class Timetable(Protocol):
    """A parsed schedule timing (``every = "15m"``, ``daily = "02:00"``...)."""

    def latest_due(self, now: datetime) -> Slot | None:
        """The latest slot with ``due_at <= now``, or None if there is none yet."""

    def next_due(self, now: datetime) -> Slot:
        """The first slot with ``due_at > now``."""

    def describe(self) -> str:
        """A canonical text of the timing, the same on every agent that parsed the same spec."""


@runtime_checkable
class SlotFunction(Protocol):
    """Parses one kind of timing. Its name is the schedule key it answers (``every``, ``cron``)."""

    name: str

    def parse(self, spec: str, options: dict[str, Any]) -> Timetable:
        """Parse ``spec``; ``options`` are the schedule's other keys (``timezone``, ``deadline``).

        Raise ValueError with a one-line message for a spec it cannot use.
        """
