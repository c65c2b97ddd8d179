from __future__ import annotations

import pytest

from fdcore.abc import AgentLoad
from fdcore.plugins.manager import CLAIM, load_plugins


@pytest.mark.parametrize(
    ("running", "waiting", "expected"),
    [(0, 0, True), (1, 0, True), (1, 1, False), (2, 0, False), (0, 2, False), (3, 0, False)],
)
def test_when_free_claims_only_with_a_free_worker(
    running: int, waiting: int, expected: bool
) -> None:
    policy = load_plugins().get(CLAIM, "when_free")
    assert policy.may_claim(AgentLoad(concurrency=2, running=running, waiting=waiting)) is expected


@pytest.mark.parametrize(("running", "waiting"), [(0, 0), (2, 0), (5, 40)])
def test_always_claims_busy_or_not(running: int, waiting: int) -> None:
    policy = load_plugins().get(CLAIM, "always")
    assert policy.may_claim(AgentLoad(concurrency=2, running=running, waiting=waiting))
