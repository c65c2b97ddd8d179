"""No error leaves an agent's poll but a duplicate name; each part of the poll has its own guard.

A plugin that raises, a bug, or an own record the agent cannot write costs the step it happened
in, is logged once (with its traceback), and is tried again at the next poll; the other parts of
the poll still run, so a running table's lease is still renewed.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage

from fdcore.abc import AgentLoad
from fdcore.clock import ManualClock
from fdcore.contract.models import AgentRecord, State
from fdcore.errors import DuplicateAgent
from fdcore.mailbox.submit import submit
from fdcore.settings.agent_toml import ScheduleConfig
from fdcore.testing.memory_fleet import START, MemoryFleet


def broken_may_claim(load: AgentLoad) -> bool:
    """A claim policy plugin's bug."""
    raise RuntimeError("the policy's own bug")


@pytest.fixture
def folder_fleet() -> Iterator[MemoryFleet]:
    root = Path(tempfile.mkdtemp(prefix="fdcore-contained-"))
    try:
        storage = LocalFolderStorage(root / "env")
        yield MemoryFleet(storage, ManualClock(START))  # type: ignore[arg-type]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _record(fleet: MemoryFleet, name: str) -> AgentRecord:
    found = fleet.mailbox.read(AgentRecord, f"agents/{name}.json")
    assert found is not None
    return found.value


def test_a_plugin_that_raises_costs_its_step_and_is_logged_once(
    fdcore_memory_fleet: MemoryFleet,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a"], request_id="r1", now=START)
    agent = fleet.agent("etl-01", stale_after=4.0, poll_seconds=1.0)  # a heartbeat every second
    monkeypatch.setattr(agent.components.claim, "may_claim", broken_may_claim)
    with caplog.at_level(logging.ERROR, logger="fdcore.agent"):
        for _ in range(3):
            agent.poll()  # raises nothing
            fleet.clock.advance(1)
    assert agent.step_errors == 3
    failures = [r for r in caplog.records if "the policy's own bug" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None  # once, with its traceback
    # The record still moved every poll: the agent is alive, not lost.
    assert _record(fleet, "etl-01").updated_at == START.replace(second=2)
    assert fleet.mailbox.status("r1") is None
    monkeypatch.undo()
    agent.poll()
    assert fleet.mailbox.status("r1") is not None  # the next poll after the fix claims it


def test_an_agent_that_cannot_write_its_record_claims_nothing_and_recovers(
    folder_fleet: MemoryFleet,
) -> None:
    fleet = folder_fleet
    submit(fleet.mailbox, ["a"], request_id="r1", now=START)
    own = Path(fleet.storage.url.removeprefix("file://")) / "agents" / "etl-01.json"
    own.mkdir(parents=True)  # a folder where the agent's own record belongs
    agent = fleet.agent("etl-01")
    for _ in range(3):
        agent.poll()
        agent.react(new_work=True)  # between polls too: the store's watch said r1 came
        fleet.clock.advance(1)
    # Unseen by the fleet (and unable to tell whether another process runs under its name),
    # it takes nothing; the problem is reported once.
    assert fleet.mailbox.status("r1") is None
    mine = [p for p in agent.problems.reported if p.startswith("agents/etl-01.json")]
    assert len(mine) == 1 and "is a folder" in mine[0], agent.problems.reported
    own.rmdir()
    agent.poll()
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.agent == "etl-01"
    assert _record(fleet, "etl-01").instance == agent.instance


def test_a_failed_record_write_still_renews_a_running_tables_lease(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a"], request_id="r1", now=START)
    agent = fleet.agent("etl-01", stale_after=10.0, poll_seconds=1.0)
    agent.poll()
    work = agent.held["r1"]
    assert work.run is not None and work.lease is not None
    first_expiry = work.lease.lease.expires_at

    def broken_write(*args: object, **kwargs: object) -> None:
        raise RuntimeError("cannot write the record")

    agent.presence.write = broken_write  # type: ignore[method-assign]
    fleet.clock.advance(8)  # past half the lease: the lease is due for renewal
    agent.poll()
    assert work.lease is not None and work.lease.lease.expires_at > first_expiry
    fleet.finish_runs()
    agent.poll()  # held work still moves: the table is recorded and the request finished
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.state is State.SUCCEEDED


def test_a_duplicate_name_still_stops_the_agent(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    first = fleet.agent("etl-01")
    first.poll()
    second = fleet.agent("etl-01")  # another process under the same name, after the first
    second.presence.previous_process_gone = lambda record: False
    with pytest.raises(DuplicateAgent):
        second.poll()


def test_a_slot_function_that_raises_wakes_nobody_and_stops_nothing(
    fdcore_memory_fleet: MemoryFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", schedules=(ScheduleConfig("hourly", ("a",), "every", "1h"),))
    assert agent.next_due(START) is not None

    class BrokenTimetable:
        def next_due(self, now: object) -> object:
            raise ValueError("the slot function's own bug")

        def latest_due(self, now: object) -> object:
            raise ValueError("the slot function's own bug")

    agent.schedules[0].timetable = BrokenTimetable()  # type: ignore[assignment]
    assert agent.next_due(START) is None  # the runtime's loop goes on; the error is logged
    agent.poll()
    # The record is still written (the schedule shows no next due time); the look failed.
    assert agent.step_errors == 2
    record = _record(fleet, "etl-01")
    assert record.updated_at == START and record.schedules[0].next_due is None
