"""End to end on the emulator: three real agents on an Azurite-backed environment.

The agents are fdcore's ``fdcore_fleet`` fixture; the two fixtures below put them on Azurite.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdcore_onelake.testing import Azurite

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.cli.views import queue_rows
from fdcore.contract.models import Outcome, State
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import (
    assert_each_table_succeeded_once,
    assert_no_double_writers,
    assert_taken_over,
    holder,
)
from fdcore.testing.tables import table_writes

SECRET_VARIABLE = "FDCORE_TEST_AZURITE_CONNECTION"
AGENT = {"poll_seconds": 0.3, "stale_after": 2, "concurrency": 2, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 1, "lease_seconds": 2}
WRITER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
STORAGE = {"connection_string_env": SECRET_VARIABLE}
# stale_after + grace + one poll, plus slack: every poll is HTTP round trips to one emulator.
TAKEOVER_WITHIN = 2 + 1 + 0.3 + 2.0


@pytest.fixture
def fdcore_environment(environment_url: str) -> str:
    """fdcore_fleet's agents share a new folder on the session's Azurite."""
    return environment_url


@pytest.fixture
def fdcore_storage_options(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Agents' [storage] names the variable holding Azurite's connection string."""
    monkeypatch.setenv(SECRET_VARIABLE, azurite.connection_string)  # before fdcore_fleet copies env
    return STORAGE


@pytest.mark.slow
def test_shared_schedule_on_azurite_makes_one_request_per_slot(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    schedule = {"id": "tick", "shared": True, "entities": ["sales"], "every": "2s"}
    for n in range(3):
        sections = {"agent": AGENT, "pipeline": PIPELINE, "runner": WRITER, "schedules": [schedule]}
        fleet.add(f"etl-0{n}", sections).start()
    try:
        time.sleep(12)
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}, [agent.output()[-2000:] for agent in fleet]
    rows = [row for row in queue_rows(mailbox) if row.schedule == "tick"]
    slots = [int(row.slot) for row in rows if row.slot]
    assert len(slots) >= 4 and len(slots) == len(set(slots))
    assert max(slots) - min(slots) + 1 == len(slots)  # no slot missed while agents were up
    for row in rows:
        succeeded = [r for r in mailbox.runs(row.id) if r.outcome is Outcome.SUCCEEDED]
        assert len(succeeded) <= 1
    assert_no_double_writers(table_writes(fleet))


@pytest.mark.slow
def test_takeover_on_azurite(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "2"
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "2"
    submit(mailbox, ["sales", "stock"], request_id="r1")
    for n in range(3):
        agent = {**AGENT, "concurrency": 1}
        fleet.add(f"etl-0{n}", {"agent": agent, "pipeline": PIPELINE, "runner": WRITER}).start()
    try:
        assert wait_until(lambda: holder(mailbox, "r1") is not None, 30)
        victim = holder(mailbox, "r1")
        assert victim is not None
        fleet.agents[victim].kill()
        assert_taken_over(mailbox, "r1", victim, within=TAKEOVER_WITHIN, timeout=30)
        assert wait_until(lambda: mailbox.status("r1").value.state is State.SUCCEEDED, 60)
    finally:
        fleet.stop_all()
    status = mailbox.status("r1").value
    assert [a.outcome for a in status.attempts] == [Outcome.LOST, Outcome.SUCCEEDED]
    assert status.attempts[0].agent == victim
    assert_each_table_succeeded_once(mailbox, "r1")
    assert_no_double_writers(table_writes(fleet))
    # Each agent measured its clock against the emulator's (one machine: within the stamps'
    # whole second), so a skewed agent on OneLake would refuse to take over. (The victim may
    # have written only its first record, which no measurement precedes.)
    for name in set(fleet.agents) - {victim}:
        record = mailbox.agent(name)
        assert record is not None and record.value.clock_skew is not None, name
        assert abs(record.value.clock_skew) < 2.0, (name, record.value.clock_skew)


class TestEmulatorRestart:
    """Azurite stopped for a while and restarted (on disk, so it keeps its blobs)."""

    @pytest.fixture
    def azurite(self, tmp_path: Path) -> Iterator[Azurite]:
        """This test's own emulator, in place of the session's: it is stopped mid-test."""
        with Azurite(location=tmp_path / "azurite-data") as emulator:
            emulator.create_container("faults")
            yield emulator

    @pytest.fixture
    def environment_url(self, azurite: Azurite) -> str:
        return azurite.url("faults", "env")

    @pytest.mark.slow
    def test_emulator_restart_mid_run_loses_and_doubles_nothing(
        self, fdcore_fleet: AgentFleet, azurite: Azurite
    ) -> None:
        fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
        for n in range(20):
            submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
        # As with the defaults (both 60 s), records and leases outlast the outage and the
        # backend's retries after it (about 6 s): nobody is taken over and no lease runs out, so
        # every run must keep its record. (An outage past stale_after is the fault suite's.)
        agent = {**AGENT, "stale_after": 20}
        pipeline = {**PIPELINE, "lease_seconds": 20}
        for n in range(3):
            fleet.add(f"etl-0{n}", {"agent": agent, "pipeline": pipeline, "runner": WRITER}).start()
        try:
            assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 30)
            azurite.stop()
            time.sleep(7)  # longer than the backend's retries (6 tries over 3-6 s)
            assert all(agent.alive() for agent in fleet)
            azurite.start()
            assert wait_until(
                lambda: all(row.state == "succeeded" for row in queue_rows(mailbox)), 90
            ), Counter(row.state for row in queue_rows(mailbox))
        finally:
            codes = fleet.stop_all()
        assert set(codes.values()) == {0}
        rows = queue_rows(mailbox)
        assert len(rows) == 20
        for row in rows:
            assert_each_table_succeeded_once(mailbox, row.id)
        assert_no_double_writers(table_writes(fleet))
        # The backend retries for a few seconds before an agent hears of an outage.
        assert any("mailbox unavailable" in agent.output() for agent in fleet)
