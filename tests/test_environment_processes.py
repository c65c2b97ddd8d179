"""``Environment.wait`` with a real ``fdcore agent run`` process on a local folder: the story it
returns is the agent's, run records included."""

from __future__ import annotations

import pytest

from fdcore import Environment
from fdcore.cli.fleet import AgentFleet

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.2, "stale_after": 5, "concurrency": 1, "shutdown_grace": 10}
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


def test_wait_returns_the_story_a_real_agent_wrote(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    agent = fleet.add("etl-01", {"agent": AGENT, "runner": RUNNER})
    with Environment.open(fleet.environment) as env:
        handle = env.submit(["sales", "stock"], id="r1")
        agent.start()
        try:
            story = handle.wait(timeout=30)
        finally:
            assert fleet.stop_all() == {"etl-01": 0}
    assert (story.state, story.agent, story.tables_done) == (
        "succeeded",
        "etl-01",
        ["sales", "stock"],
    )
    assert [(run.table, run.outcome) for run in story.runs] == [
        ("sales", "succeeded"),
        ("stock", "succeeded"),
    ]
