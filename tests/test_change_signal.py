"""The change signal: an agent that knows of no open request reads one key a poll instead of
listing, finds an announced submission at its next poll, and what nobody announced at its next
full listing (fdcore.mailbox.signal, fdcore.agent.discovery)."""

from __future__ import annotations

from fdcore.agent.discovery import FULL_LOOK_SECONDS
from fdcore.contract.layout import SIGNAL, request_key
from fdcore.contract.models import Request
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.signal import ChangeSignal, announce
from fdcore.mailbox.submit import submit
from fdcore.settings.agent_toml import RetentionConfig
from fdcore.testing.memory_fleet import START, MemoryFleet

NO_RETENTION = RetentionConfig(enabled=False)


def idle_agent(fleet: MemoryFleet) -> None:
    fleet.agent("etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0)
    fleet.agents["etl-01"].poll()  # the first poll lists (and makes the signal)


def poll(fleet: MemoryFleet, seconds: float = 5.0) -> int:
    """Advance the time, poll etl-01: its store operations, its heartbeat aside."""
    agent = fleet.agents["etl-01"]
    fleet.clock.advance(seconds)
    written = agent.presence.written
    before = fleet.storage.operations
    agent.poll()
    return fleet.storage.operations - before - (agent.presence.written != written)


def test_an_idle_poll_reads_the_signal_alone() -> None:
    fleet = MemoryFleet.fresh()
    idle_agent(fleet)
    assert [poll(fleet) for _ in range(10)] == [1] * 10


def test_a_submission_is_claimed_at_the_next_poll() -> None:
    fleet = MemoryFleet.fresh()
    idle_agent(fleet)
    poll(fleet)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=fleet.clock.now())
    assert fleet.storage.read(SIGNAL) is None  # announced: the signal is gone
    poll(fleet)
    assert "r1" in fleet.agents["etl-01"].held


def test_work_nobody_announced_is_found_at_the_next_full_listing() -> None:
    fleet = MemoryFleet.fresh()
    idle_agent(fleet)
    # An earlier release's submission (or one whose writer died before announcing it).
    request = Request(id="r1", entities=["sales"], created_at=START)
    fleet.mailbox.create(request_key("r1"), request)
    polls = 0
    while "r1" not in fleet.agents["etl-01"].held:
        poll(fleet)
        polls += 1
        assert polls * 5.0 <= FULL_LOOK_SECONDS + 5.0, "not found at the full listing"
    assert polls * 5.0 >= FULL_LOOK_SECONDS - 5.0  # the signal alone did not show it


def test_an_agent_that_knows_of_open_work_lists_every_poll() -> None:
    fleet = MemoryFleet.fresh()
    idle_agent(fleet)
    fleet.agent("etl-02", retention=NO_RETENTION, take_over=True, poll_seconds=5.0)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=fleet.clock.now())
    fleet.agents["etl-02"].poll()  # etl-02 claims it
    assert "r1" in fleet.agents["etl-02"].held
    # etl-01 saw it submitted: open until final, so it looks as before (lists, sweeps).
    assert all(poll(fleet) > 1 for _ in range(3))
    fleet.finish_runs("r1")
    fleet.agents["etl-02"].poll()
    poll(fleet)  # reads the final status once
    assert [poll(fleet) for _ in range(3)] == [1, 1, 1]


def test_a_reader_sees_every_announcement_after_its_last_read() -> None:
    fleet = MemoryFleet.fresh()
    signal = ChangeSignal(fleet.mailbox)
    assert signal.moved()  # first call: unknown
    assert signal.moved()  # not seen yet: its listing did not land
    signal.seen()
    assert not signal.moved()
    announce(fleet.mailbox)
    announce(fleet.mailbox)  # twice before a read: one look
    assert signal.moved()
    signal.seen()
    assert not signal.moved()
    other = ChangeSignal(fleet.mailbox)
    assert other.moved()
    other.seen()
    announce(fleet.mailbox)
    assert other.moved()  # gone: made again, with a new version
    other.seen()
    assert signal.moved()  # the new version differs from the one it saw


def test_a_listing_cut_short_by_the_store_leaves_the_signal_moved() -> None:
    fleet = MemoryFleet.fresh()
    idle_agent(fleet)
    poll(fleet)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=fleet.clock.now())
    ChangeSignal(fleet.mailbox).moved()  # another agent made the signal again
    storage = fleet.storage
    listing = storage.list_changes

    def failing(prefix: str, cursor: object | None = None) -> object:
        raise StorageUnavailable(prefix, "the store is down")

    storage.list_changes = failing  # type: ignore[method-assign]
    poll(fleet)  # reads the signal (moved), then its listing fails
    assert "r1" not in fleet.agents["etl-01"].held
    storage.list_changes = listing  # type: ignore[method-assign]
    poll(fleet)
    assert "r1" in fleet.agents["etl-01"].held
