"""The deterministic simulator: real agents under virtual time, seeded faults, checked invariants.

``fdcore simulate`` runs one seeded :class:`World`; see docs/simulator.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from fdcore.simulator.cli import register
from fdcore.simulator.invariants import Checker, Violation, default_checkers
from fdcore.simulator.report import Report, build_report
from fdcore.simulator.scenario import Scenario
from fdcore.simulator.world import PartsFactory, World


def simulate(
    scenario: Scenario,
    *,
    checkers: Sequence[Checker] | None = None,
    parts: PartsFactory | None = None,
) -> Report:
    """Run one seeded world and report on it.

    ``checkers`` replaces :func:`default_checkers`; ``parts`` builds each agent's components
    (claim and takeover policies, leases, runner) instead of the plugins its config names.
    """
    return build_report(World(scenario, checkers=checkers, parts=parts).run())


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
