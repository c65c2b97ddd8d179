"""CPU starvation in the simulator: agents whose every step waits a while, for a while.

A starved agent lives on, but its steps (polls, reactions) come late: its record too, so the
others may judge it lost and take its requests over while its tables run to their end. No table
a holder saw finish under its fence runs again (invariant 15, ``once-per-request``).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from test_simulator import broken

from fdcore.agent.tables import Tables
from fdcore.simulator import Scenario, simulate

#: Spells of starvation 30 times an agent-hour, up to 3 x the takeover time, each step of a
#: spell waiting up to the takeover time: some come after the others judged the agent lost.
STARVED: dict[str, Any] = {
    "take_over": True,
    "starve_rate": 30.0,
    "requests": 60,
    "stale_after": 10.0,
    "grace_seconds": 5.0,
    "table_median": 5.0,
}

#: make test runs 100 seeds (x 2 claim policies); make soak 1,000.
STARVE_SEEDS = int(os.environ.get("FDCORE_SIMULATOR_STARVE_SEEDS", "100"))


def run_seeds(seeds: range) -> dict[str, int]:
    """Every seed under both claim policies; fails on a violation, naming it. What was met."""
    met = {"runs": 0, "steps starved": 0, "attempts marked lost": 0, "tables succeeded twice": 0}
    failures = []
    for seed in seeds:
        for claim in ("when_free", "always"):
            report = simulate(Scenario(seed=seed, claim=claim, **STARVED))
            if not report.ok:
                failures.append(report.text())
            met["runs"] += 1
            for name in ("steps starved", "attempts marked lost", "tables succeeded twice"):
                met[name] += report.checks[name]
    assert not failures, f"{len(failures)} runs failed; the first:\n" + "\n".join(failures[:2])
    return met


def test_starved_agents_taken_over_never_get_a_finished_table_run_again() -> None:
    met = run_seeds(range(10))
    assert met["steps starved"] > 200
    assert met["attempts marked lost"] > 40  # slow agents were taken for lost ones


@pytest.mark.slow
@pytest.mark.timeout(60 + STARVE_SEEDS)  # about 0.15 s a run, 2 runs a seed, on 2 busy cores
def test_the_starvation_fault_holds_over_many_seeds() -> None:
    # FDCORE_SIMULATOR_STARVE_SEEDS=1000 (make soak): 2,000 runs.
    met = run_seeds(range(STARVE_SEEDS))
    assert met["runs"] == 2 * STARVE_SEEDS
    assert met["attempts marked lost"] > STARVE_SEEDS


def test_a_taker_that_ignores_the_earlier_run_records_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed 6: a starved agent is taken over while its table ends; it records the run under its
    # fence, and a taker that does not read that record runs the table again (the seed moves
    # when the agents' store calls do: it was 2 until a full agent's poll stopped listing).
    scenario = Scenario(seed=6, **STARVED)
    assert simulate(scenario).ok
    monkeypatch.setattr(Tables, "_done_earlier", lambda self, work, table, now: False)
    assert "once-per-request" in broken(simulate(scenario))
