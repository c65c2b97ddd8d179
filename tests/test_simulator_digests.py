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

from fdcore.simulator import Scenario, simulate

SCENARIOS: dict[str, dict[str, Any]] = {
    "faulty": {
        "seed": 1,
        "claim": "always",
        "take_over": True,
        "requests": 8,
        "poison": 1,
        "max_tables": 2,
        "table_median": 10.0,
        "stale_after": 30.0,
        "grace_seconds": 30.0,
        "crash_rate": 10.0,
        "pause_rate": 20.0,
        "latency": 0.05,
    },
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

# Taken on main's simulator (before the options became attrs validators and the world's reads
# went through the mailbox); the figures per agent-poll and per agent-second added since.
DIGESTS = {
    "faulty": "f2149d86bd21e740f274d9a93ca9d45b9a8c22f4f7b9a0385f02f930a703d0b2",
    "store-errors-skew": "6ff3b360d4b63375e36ffe20f64193a23fe2dcd75f0ddc248c2f7e01ee7e2fab",
    "schedules": "37533125967d1895532640ea8f584af781716fdb215c8052f7e059f06e24c279",
    "retention-cancel": "5310a2fbdcc7c9afd753c35b3ac7df29e2156b05917171e7c4fa1d38363a2cf6",
    "retention-process": "b08ab254a06357c5288be80827ad176d5497804a54c1fb0e4995b55b342369b8",
    "uneven": "774e2d042a9e5712ecebce50d010eba34c3736faea73def90c9a6526937e35d6",
}

pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")


def digest(scenario: Scenario) -> str:
    document = simulate(scenario).to_json(wall=False)
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_seeded_report_stays_byte_identical(name: str) -> None:
    found = digest(Scenario(**SCENARIOS[name]))
    assert found == DIGESTS[name], f"{name}: the report changed; its digest now {found}"
