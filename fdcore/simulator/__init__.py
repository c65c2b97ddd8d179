"""The deterministic simulator: real agents under virtual time, seeded faults, checked invariants.

``fdcore simulate`` runs one seeded :class:`World`; see docs/simulator.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from fdcore.simulator.cli import register
from fdcore.simulator.invariants import Checker, Violation, default_checkers
from fdcore.simulator.report import Report, build_report
from fdcore.simulator.scenario import Scenario
from fdcore.simulator.world import PartsFactory, SchedulesFactory, World


def simulate(
    scenario: Scenario,
    *,
    checkers: Sequence[Checker] | None = None,
    parts: PartsFactory | None = None,
    schedules: SchedulesFactory | None = None,
) -> Report:
    """Run one seeded world and report on it.

    ``checkers`` replaces :func:`default_checkers`; ``parts`` builds each agent's components
    (claim and takeover policies, leases, runner) instead of the plugins its config names;
    ``schedules`` builds each agent process's schedules instead of the installed slot functions.
    """
    world = World(scenario, checkers=checkers, parts=parts, schedules=schedules)
    return build_report(world.run())


__all__ = [
    "Checker",
    "Report",
    "Scenario",
    "Violation",
    "World",
    "default_checkers",
    "register",
    "simulate",
]
