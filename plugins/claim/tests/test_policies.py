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


@pytest.mark.parametrize(
    ("waiting", "host_free", "expected"),
    [(0, 0, False), (0, 1, True), (1, 1, False), (1, 2, True), (0, None, True)],
)
def test_when_free_counts_the_hosts_free_slots(
    waiting: int, host_free: int | None, expected: bool
) -> None:
    """The agent's own workers are idle (concurrency 4): the host's free slots decide."""
    policy = load_plugins().get(CLAIM, "when_free")
    load = AgentLoad(concurrency=4, running=0, waiting=waiting, host_free=host_free)
    assert policy.may_claim(load) is expected
