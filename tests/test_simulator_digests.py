"""Seeded simulator reports, pinned: a refactor of the simulator changes no figure.

Each scenario below meets a different part of the world (faults, store errors and skew,
schedules, the product's retention and operators' cancels, a retention process, an uneven
fleet). Its ``--json`` report (the wall time aside) is pinned by its SHA-256. A change meant to
change what agents do or what the report says (fewer reads, a new figure) updates the digests
the failing test prints, and says why in its commit; any other change must leave them alone.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from test_simulator import FAULTY

from fdcore.simulator import Scenario, simulate

SCENARIOS: dict[str, dict[str, Any]] = {
    "faulty": {"seed": 1, "claim": "always", "take_over": True, **FAULTY},
    "store-errors-skew": {
        "seed": 2,
        "requests": 20,
        "take_over": True,
        "error_rate": 0.05,
        "skew": 20.0,
        "crash_rate": 4.0,
    },
    "schedules": {
        "seed": 3,
        "requests": 5,
        "schedules": ("every=1h",),
        "unshared_schedules": ("every=30m",),
        "schedule_hours": 2.0,
        "take_over": True,
        "crash_rate": 1.0,
    },
    "retention-cancel": {
        "seed": 4,
        "requests": 30,
        "retention_keep": 600.0,
        "cancel": 0.2,
        "take_over": True,
    },
    "retention-process": {
        "seed": 5,
        "requests": 20,
        "retention_runs": 300.0,
        "error_rate": 0.02,
    },
    "uneven": {
        "seed": 6,
        "requests": 30,
        "agent_speeds": (("agent-3", 0.5),),
        "agent_concurrency": (("agent-1", 4),),
        "agent_skews": (("agent-2", -30.0),),
        "arrival": "bursty",
        "burst": 10,
    },
}

# Main's figures (before the options became attrs validators and the world's reads went
# through the mailbox: compared side by side, every key but the two below the same, in the
# same order) with the store operations per agent-poll and per agent-second added.
DIGESTS = {
    "faulty": "c6720116071161d99879ec933dcda429247abd1fa507f1e51271fc965747a5aa",
    "store-errors-skew": "34c7a174a82de028b6e6835baa62ec8d9cd4aa4334bb84d2367705a43e2d1408",
    "schedules": "0dfed5552129409e4b172fe036016073e324dec42d476ba796a8920ff39589ae",
    "retention-cancel": "8466d624846904064cd2a5439fa26166f47a03ebc22ec13300623c73d6bcb477",
    "retention-process": "2a412a5afcfd5a70edf07447bdb0277d95641db8bd29b65bd69a4f6a69b8f718",
    "uneven": "21cc9b393b925383c93d43e9ea079cc92d2314425550f4e34e53bd178383e61b",
}

pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")


def digest(scenario: Scenario) -> str:
    document = simulate(scenario).to_json(wall=False)
    # as `fdcore simulate --json` prints it, key order included
    return hashlib.sha256(json.dumps(document, indent=2).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_seeded_report_stays_byte_identical(name: str) -> None:
    found = digest(Scenario(**SCENARIOS[name]))
    assert found == DIGESTS[name], f"{name}: the report changed; its digest now {found}"
