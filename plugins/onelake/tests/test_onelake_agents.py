"""End to end on the emulator: three real agents on an Azurite-backed environment."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from fdcore_onelake.testing import Azurite
from processes_helpers import double_writers, fleet_on, table_writes

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.cli.views import queue_rows
from fdcore.contract.models import Outcome, State
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit

SECRET_VARIABLE = "FDCORE_TEST_AZURITE_CONNECTION"
AGENT = {"poll_seconds": 0.3, "stale_after": 2, "concurrency": 2, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 1, "lease_seconds": 2}
WRITER = {"kind": "python", "function": "fdcore_test_tables:write_table"}
STORAGE = {"connection_string_env": SECRET_VARIABLE}


def azurite_fleet(
    tmp_path: Path, azurite: Azurite, environment_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[AgentFleet, Mailbox]:
    """Agents whose [storage] names the variable holding Azurite's connection string."""
    monkeypatch.setenv(SECRET_VARIABLE, azurite.connection_string)  # before fleet_on copies env
    return fleet_on(tmp_path, environment_url, STORAGE)


@pytest.mark.slow
def test_shared_schedule_on_azurite_makes_one_request_per_slot(
    tmp_path: Path, azurite: Azurite, environment_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, mailbox = azurite_fleet(tmp_path, azurite, environment_url, monkeypatch)
    schedule = {"id": "tick", "shared": True, "entities": ["sales"], "every": "2s"}
    for n in range(3):
        fleet.add(
            f"etl-0{n}",
            {
                "agent": AGENT,
                "pipeline": PIPELINE,
                "runner": WRITER,
                "storage": STORAGE,
                "schedules": [schedule],
            },
        ).start()
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
    assert double_writers(table_writes(tmp_path)) == []


@pytest.mark.slow
def test_takeover_on_azurite(
    tmp_path: Path, azurite: Azurite, environment_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, mailbox = azurite_fleet(tmp_path, azurite, environment_url, monkeypatch)
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "2"
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "2"
    submit(mailbox, ["sales", "stock"], request_id="r1")
    for n in range(3):
        fleet.add(
            f"etl-0{n}",
            {
                "agent": {**AGENT, "concurrency": 1},
                "pipeline": PIPELINE,
                "runner": WRITER,
                "storage": STORAGE,
            },
        ).start()

    def holder() -> str | None:
        status = mailbox.status("r1")
        return status.value.agent if status and status.value.state is State.RUNNING else None

    try:
        assert wait_until(lambda: holder() is not None, 30)
        victim = holder()
        assert victim is not None
        fleet.agents[victim].kill()
        assert wait_until(lambda: mailbox.status("r1").value.state is State.SUCCEEDED, 60)
    finally:
        fleet.stop_all()
    status = mailbox.status("r1").value
    assert [a.outcome for a in status.attempts] == [Outcome.LOST, Outcome.SUCCEEDED]
    assert status.attempts[0].agent == victim
    runs = mailbox.runs("r1")
    assert Counter(r.table for r in runs if r.outcome is Outcome.SUCCEEDED) == {
        "sales": 1,
        "stock": 1,
    }
    assert double_writers(table_writes(tmp_path)) == []


@pytest.mark.slow
def test_emulator_restart_mid_run_loses_and_doubles_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Azurite stopped for a while and restarted (on disk, so it keeps its blobs)."""
    with Azurite(location=tmp_path / "azurite-data") as emulator:
        emulator.create_container("faults")
        fleet, mailbox = azurite_fleet(
            tmp_path, emulator, emulator.url("faults", "env"), monkeypatch
        )
        for n in range(20):
            submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
        for n in range(3):
            # Leases outlast the backend's retry budget (about 6 s), as the defaults do.
            pipeline = {**PIPELINE, "lease_seconds": 8}
            fleet.add(
                f"etl-0{n}",
                {"agent": AGENT, "pipeline": pipeline, "runner": WRITER, "storage": STORAGE},
            ).start()
        try:
            assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 30)
            emulator.stop()
            time.sleep(7)  # longer than the backend's retries (6 tries over 3-6 s)
            assert all(agent.alive() for agent in fleet)
            emulator.start()
            assert wait_until(
                lambda: all(row.state == "succeeded" for row in queue_rows(mailbox)), 90
            ), Counter(row.state for row in queue_rows(mailbox))
        finally:
            codes = fleet.stop_all()
        assert set(codes.values()) == {0}
        rows = queue_rows(mailbox)
        assert len(rows) == 20
        for row in rows:
            done = Counter(r.table for r in mailbox.runs(row.id) if r.outcome is Outcome.SUCCEEDED)
            assert done == {"a": 1, "b": 1}, (row.id, done)
        assert double_writers(table_writes(tmp_path)) == []
        # The backend retries for a few seconds before an agent hears of an outage.
        assert any("mailbox unavailable" in agent.output() for agent in fleet)
