"""Operators' cancels in the simulator (``--cancel``): under crashes, pauses, store errors and
clock skew no table of a request starts after its holder saw its cancel, every request still
ends final, and an agent that ignores cancels is caught."""

from __future__ import annotations

from typing import Any

import pytest

from fdcore.agent.cancels import Cancels
from fdcore.simulator import Scenario, simulate

pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")

FAULTS: dict[str, Any] = {
    "requests": 60,
    "cancel": 0.4,
    "max_tables": 3,
    "table_median": 10.0,
    "stale_after": 30.0,
    "grace_seconds": 30.0,
    "take_over": True,
    "crash_rate": 6.0,
    "pause_rate": 6.0,
    "error_rate": 0.03,
    "skew": 3.0,
}


@pytest.mark.parametrize("seed", [1, 2])
def test_cancels_are_honoured_under_faults(seed: int) -> None:
    report = simulate(Scenario(seed=seed, **FAULTS))
    assert report.ok, [v.message for v in report.violations]
    figures = report.to_json()
    assert figures["requests"].get("cancelled", 0) > 5  # the case was met, not skipped
    assert figures["checks"]["cancels"] >= figures["requests"]["cancelled"]


def test_an_agent_that_ignores_cancels_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Cancels, "stop_held", lambda self, now: None)
    report = simulate(Scenario(seed=1, requests=60, cancel=0.5, max_tables=3))
    assert "cancel" in {violation.invariant for violation in report.violations}
    assert "after it saw the request's cancel" in report.violations[0].message


def test_no_cancel_leaves_the_run_as_it_was() -> None:
    """``--cancel 0`` draws nothing: the seed's plan, and so its figures, are unchanged."""
    plain = simulate(Scenario(seed=4, requests=30)).to_json()
    assert plain["checks"]["cancels"] == 0
    assert "cancelled" not in plain["requests"]
