"""The deterministic simulator: real agents under virtual time, seeded faults, checked invariants.

``fdcore simulate`` runs one seeded :class:`World`; see docs/simulator.md. The modules, each
importing only those before it: :mod:`.scenario` (what to run), :mod:`.options` (a scenario on
the command line), :mod:`.plan` (what the seed fixes), :mod:`.trace` (what happened),
:mod:`.store` (each agent's faulty view of the store), :mod:`.world` (plays a plan out),
:mod:`.invariants` and :mod:`.schedules` (the checkers that judge it), :mod:`.report`,
:mod:`.simulation` (a run put together) and :mod:`.cli`. No module imports this package.

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); ``fdcore
simulate`` is its interface.
"""

from __future__ import annotations

from fdcore.simulator.cli import Simulate
from fdcore.simulator.invariants import Checker, Violation
from fdcore.simulator.report import Report
from fdcore.simulator.scenario import Scenario
from fdcore.simulator.simulation import default_checkers, simulate, simulate_world
from fdcore.simulator.world import World

__all__ = [
    "Checker",
    "Report",
    "Scenario",
    "Simulate",
    "Violation",
    "World",
    "default_checkers",
    "simulate",
    "simulate_world",
]
