"""``Environment.wait`` on Azurite with a real agent process (docs/python.md): where the store
cannot watch, a wait reads the request's status once a poll until it is final."""

from __future__ import annotations

import pytest
from fdcore_onelake.testing import Azurite

from fdcore import Environment, QueueFilter, RequestCancelled, RequestNotFound, WaitTimedOut
from fdcore.cli.fleet import AgentFleet
from fdcore.environment import ACTIVE_STATES, Cancellation

pytestmark = pytest.mark.processes

VARIABLE = "FDCORE_TEST_AZURITE_CONNECTION"
AGENT = {"poll_seconds": 0.3, "stale_after": 5, "concurrency": 2, "shutdown_grace": 10}
WRITER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


@pytest.fixture
def fdcore_environment(environment_url: str) -> str:
    """fdcore_fleet's agent works in a new folder on the session's Azurite."""
    return environment_url


@pytest.fixture
def fdcore_storage_options(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The agent's [storage], and this test's Environment.open options: the variable holding
    Azurite's connection string."""
    monkeypatch.setenv(VARIABLE, azurite.connection_string)  # before fdcore_fleet copies env
    return {"connection_string_env": VARIABLE}


@pytest.mark.slow
def test_wait_on_azurite_returns_the_final_story_or_raises_how_it_ended(
    fdcore_fleet: AgentFleet, fdcore_environment: str, fdcore_storage_options: dict[str, str]
) -> None:
    fdcore_fleet.add("etl-01", {"agent": AGENT, "runner": WRITER}).start()
    with Environment.open(fdcore_environment, poll=0.5, **fdcore_storage_options) as env:
        story = env.submit(["sales", "customers"]).wait(timeout=60)
        assert story.state == "succeeded"
        assert sorted(run.table for run in story.runs) == ["customers", "sales"]
        assert env.wait(story.id, timeout=1).state == "succeeded"  # final already: at once
        with pytest.raises(RequestNotFound):
            env.wait("no-such-request", timeout=1)
        fdcore_fleet.agents["etl-01"].kill()
        handle = env.submit(["sales"])  # no agent left to run it
        with pytest.raises(WaitTimedOut) as timed_out:
            handle.wait(timeout=1.5)
        assert (timed_out.value.request_id, timed_out.value.state) == (handle.id, "waiting")
        [row] = env.queue(QueueFilter(state="active")).rows
        assert row.id == handle.id and row.state in ACTIVE_STATES
        # Cancelled while nobody holds it: it ends at once, and a wait says so.
        assert isinstance(handle.cancel(by="ann", reason="not today"), Cancellation)
        with pytest.raises(RequestCancelled) as cancelled:
            handle.wait(timeout=10)
    assert cancelled.value.story.cancel.by == "ann"
