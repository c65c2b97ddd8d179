"""Clock skew: an agent whose clock runs far ahead of the store's takes nothing over.

Real agent processes; one runs its clock 20 s ahead (``FDCORE_TEST_CLOCK_SKEW``). By its clock
the other agent's record is 20 s old, far past ``stale_after`` + grace: without the skew check it
takes the live agent's request over and the two run the table at once. The same holds for the
live agent's table lease when the skewed agent claims another request on that table.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import assert_no_double_writers, double_writers, holder
from fdcore.testing.tables import table_writes

AGENT = {"poll_seconds": 0.2, "stale_after": 3.0, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"take_over": True, "grace_seconds": 1.0, "lease_seconds": 3.0}
WRITER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


def add_live_and_ahead(
    fleet: AgentFleet, pipeline: dict[str, object], table_seconds: float
) -> AgentProcess:
    """Request r1 on table sales, run by etl-01 (started); etl-02, 20 s ahead, added."""
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = str(table_seconds)
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = str(table_seconds)
    submit(fleet.mailbox, ["sales"], request_id="r1")
    fleet.add("etl-01", {"agent": AGENT, "pipeline": pipeline, "runner": WRITER}).start()
    ahead = fleet.add("etl-02", {"agent": AGENT, "pipeline": pipeline, "runner": WRITER})
    ahead.env = {**fleet.env, "FDCORE_TEST_CLOCK_SKEW": "20"}
    return ahead


def start_ahead(fleet: AgentFleet, ahead: AgentProcess) -> None:
    """Once etl-01 runs r1: start etl-02, and wait for it to have measured its skew."""
    assert wait_until(lambda: holder(fleet.mailbox, "r1") == "etl-01", 20)
    ahead.start()
    assert wait_until(lambda: "clock differs from the store's by +20" in ahead.output(), 20)


@pytest.mark.slow
def test_an_agent_with_a_skewed_clock_takes_no_live_agents_request(
    fdcore_fleet: AgentFleet,
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    ahead = add_live_and_ahead(fleet, PIPELINE, table_seconds=6)
    try:
        start_ahead(fleet, ahead)
        time.sleep(2)
        assert holder(mailbox, "r1") == "etl-01"
        agents = subprocess.run(
            [sys.executable, "-m", "fdcore.cli", "agents", "--env", fleet.environment, "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        skews = {row["name"]: row["clock_skew"] for row in json.loads(agents.stdout)["agents"]}
        assert abs(skews["etl-01"]) < 1 and 19 < skews["etl-02"] < 21, skews
        assert wait_until(
            lambda: mailbox.status("r1").value.state is State.SUCCEEDED,  # type: ignore[union-attr]
            30,
        )
    finally:
        fleet.stop_all()
    status = mailbox.status("r1").value  # type: ignore[union-attr]
    assert [a.agent for a in status.attempts] == ["etl-01"]
    assert_no_double_writers(table_writes(fleet))
    assert "it takes no request or lease over" in ahead.output()


@pytest.mark.slow
def test_an_agent_with_a_skewed_clock_takes_no_live_holders_table_lease(
    fdcore_fleet: AgentFleet,
) -> None:
    """Issue 24, item 2: the skewed agent claims a request of its own on the table a live agent
    runs; it must wait for that run's lease to be given up, never take it as run out."""
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    pipeline = {**PIPELINE, "claim": "when_free"}  # the busy etl-01 leaves r2 to etl-02
    ahead = add_live_and_ahead(fleet, pipeline, table_seconds=8)
    try:
        start_ahead(fleet, ahead)
        submit(mailbox, ["sales"], request_id="r2")
        assert wait_until(lambda: holder(mailbox, "r2") == "etl-02", 10)
        done = (State.SUCCEEDED, State.FAILED)
        assert wait_until(
            lambda: all(mailbox.status(r).value.state in done for r in ("r1", "r2")),  # type: ignore[union-attr]
            40,
        )
    finally:
        fleet.stop_all()
    for request_id in ("r1", "r2"):
        assert mailbox.status(request_id).value.state is State.SUCCEEDED  # type: ignore[union-attr]
    writes = table_writes(fleet)
    # From the table runs' own log: one run each, and none beside another, even a run whose
    # write the fencing check refused (a table writing where the token is not checked).
    assert sorted((w.request, w.agent) for w in writes) == [("r1", "etl-01"), ("r2", "etl-02")]
    assert double_writers(writes, rejected_too=True) == []
