"""End to end on the emulator: three real agents on an Azurite-backed environment.

The agents are fdcore's ``fdcore_fleet`` fixture; the two fixtures below put them on Azurite.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdcore_onelake.testing import Azurite

from fdcore.cli.fleet import AgentFleet
from fdcore.contract.models import Outcome
from fdcore.environment.queue import queue_rows
from fdcore.testing.assertions import assert_no_double_writers
from fdcore.testing.scenarios import outage_mid_run, takeover_after_sigkill
from fdcore.testing.tables import table_writes

pytestmark = pytest.mark.processes

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
    # Each survivor measures its clock against the emulator's (one machine: within the stamps'
    # whole second), so a skewed agent on OneLake would refuse to take over.
    sections = {"agent": {**AGENT, "concurrency": 1}, "pipeline": PIPELINE, "runner": WRITER}
    takeover_after_sigkill(fdcore_fleet, sections, within=TAKEOVER_WITHIN)


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
        # As with the defaults (both 60 s), records and leases outlast the outage and the
        # backend's retries after it (about 6 s): nobody is taken over and no lease runs out,
        # so every run must keep its record.
        sections = {
            "agent": {**AGENT, "stale_after": 20},
            "pipeline": {**PIPELINE, "lease_seconds": 20},
            "runner": WRITER,
        }
        outage_mid_run(fdcore_fleet, sections, down=azurite.stop, up=azurite.start, requests=20)
