"""The invariant checkers' common ground: what a checker is and what it reports.

A checker is any object with the four methods of :class:`Checker`. The world calls the live
hooks of the checkers it is given; whoever built it then asks each for its violations
(``finish``). :func:`fdcore.simulator.simulation.default_checkers` is the list a run checks by
default, so a new invariant is a new class in that list. Numbers and names are the ids of the
table in docs/simulator.md, "What is checked". The checkers live by family:
:mod:`.invariants_tables` (who writes a table, and how often), :mod:`.invariants_liveness`
(takeover, heartbeats, paused and lost agents), :mod:`.invariants_requests` (every request's
end) and :mod:`fdcore.simulator.schedules` (shared schedules, 1).
"""

from __future__ import annotations

from typing import Any

import attrs

from fdcore.simulator.trace import (
    TableWrite,
)
from fdcore.simulator.world import SimulatedAgent, World


@attrs.frozen
class Violation:
    invariant: str  # "1".."6", or a name: "final", "once", "agent", ...
    time: float  # virtual seconds
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "time": round(self.time, 3), "message": self.message}


class Checker:
    """Base of the checkers: every hook is optional."""

    invariant = ""
    title = ""

    def after_poll(self, world: World, agent: SimulatedAgent) -> None:
        """Called after every agent poll that did not raise (state is consistent here)."""

    def after_reaction(self, world: World, agent: SimulatedAgent) -> None:
        """Called after every reaction between polls (:meth:`Agent.react`) that did not raise."""

    def after_change(self, world: World) -> None:
        """Called after an agent starts, crashes, pauses or resumes."""

    def finish(self, world: World) -> list[Violation]:
        """Read the finished world's trace; return what broke."""
        return []

    def summary(self) -> dict[str, Any]:
        """Figures for the report (what was exercised, what was measured)."""
        return {}


def who(agent: str, incarnation: int) -> str:
    return f"{agent} (process {incarnation})"


def attempt_of(write: TableWrite) -> tuple[str, int, str, int]:
    return (write.agent, write.incarnation, write.request, write.attempt)
