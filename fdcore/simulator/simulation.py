"""One simulation run put together: the plan drawn from the scenario, the world that plays it
out, the checkers that judge it (:func:`default_checkers` unless told otherwise), the report."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from fdcore.errors import ConfigError
from fdcore.simulator.invariants import Checker
from fdcore.simulator.invariants_liveness import (
    LostRequestsFail,
    NoTakeoverFromLiveAgent,
    OwnAttemptsNotLost,
    PausedAgentStops,
    RecordInTime,
    TakeoverInTime,
)
from fdcore.simulator.invariants_requests import (
    AgentsNeverRaise,
    ArchivedWhole,
    CancelsHonoured,
    EveryRequestFinal,
    FinalStaysFinal,
    NoStrandedRequests,
    SucceedsOnce,
)
from fdcore.simulator.invariants_tables import (
    LeaseHeldUntilItRunsOut,
    OneWriterPerTable,
    RunLogComplete,
    RunsOncePerRequest,
    TableOncePerAttempt,
)
from fdcore.simulator.plan import Plan, installed_plugins, plan_schedules
from fdcore.simulator.report import Report, build_report
from fdcore.simulator.scenario import Scenario
from fdcore.simulator.schedules import SharedSchedules
from fdcore.simulator.world import PartsFactory, SchedulesFactory, World


def default_checkers(scenario: Scenario) -> list[Checker]:
    """Every invariant the simulator checks (docs/simulator.md, "What is checked")."""
    return [
        SharedSchedules(plan_schedules(scenario, installed_plugins())),
        AgentsNeverRaise(),
        OneWriterPerTable(),
        LeaseHeldUntilItRunsOut(),
        TableOncePerAttempt(),
        RunsOncePerRequest(),
        RunLogComplete(),
        TakeoverInTime(),
        NoTakeoverFromLiveAgent(),
        RecordInTime(),
        OwnAttemptsNotLost(),
        PausedAgentStops(),
        LostRequestsFail(),
        NoStrandedRequests(scenario.claim),
        EveryRequestFinal(),
        SucceedsOnce(),
        CancelsHonoured(),
        ArchivedWhole(),
        FinalStaysFinal(),
    ]


def simulate_world(
    scenario: Scenario,
    *,
    checkers: Sequence[Checker] | None = None,
    parts: PartsFactory | None = None,
    schedules: SchedulesFactory | None = None,
) -> tuple[World, Report]:
    """Run one seeded world; return it (its store and trace, for a closer look) and its report.

    ``checkers`` replaces :func:`default_checkers`; ``parts`` builds each agent's components
    (claim and takeover policies, leases, runner) instead of the plugins its config names;
    ``schedules`` builds each agent process's schedules instead of the installed slot functions.
    """
    plan = Plan(scenario)  # loads the plugins (once per process) before the wall clock starts
    chosen = list(checkers) if checkers is not None else default_checkers(scenario)
    began = time.perf_counter()
    world = World(plan, chosen, parts=parts, schedules=schedules).run()
    violations = [violation for checker in chosen for violation in checker.finish(world)]
    report = build_report(world, chosen, violations, time.perf_counter() - began)
    return world, report


def simulate(
    scenario: Scenario,
    *,
    checkers: Sequence[Checker] | None = None,
    parts: PartsFactory | None = None,
    schedules: SchedulesFactory | None = None,
) -> Report:
    """Run one seeded world and report on it (the options as :func:`simulate_world`'s)."""
    _world, report = simulate_world(scenario, checkers=checkers, parts=parts, schedules=schedules)
    return report


def keep_mailbox(world: World, folder: Path) -> int:
    """Copy the world's mailbox, as the run left it, into a new local-folder environment at
    ``folder`` (created; refused if it holds anything), for the commands to read (``fdcore
    cost``, ``fdcore queue``). Returns the number of files copied."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError("fdcore simulate", "--mailbox", f"{folder} is not an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    target = installed_plugins().open_storage(str(folder), create=True, setting="--mailbox")
    copied = 0
    try:
        for key in sorted(world.store.list("")):
            blob = world.store.read(key)
            if blob is not None:
                target.create(key, blob.data)
                copied += 1
    finally:
        target.close()
    return copied
