"""The readers around a fleet (``fdcore queue --watch``'s QueueReader, ``Environment.changes()``)
pay one read of the change signal per look while every request is finished and nothing was
submitted; a submission shows at the next look, and what nobody announced at the next full
listing (fdcore.mailbox.signal)."""

from __future__ import annotations

import types
from datetime import datetime, timezone

import pytest

from fdcore.contract.layout import request_key, status_key
from fdcore.contract.models import Attempt, Outcome, Request, State, Status
from fdcore.environment.changes import ChangeTracker
from fdcore.environment.queue import QueueReader
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.index import MailboxIndex
from fdcore.mailbox.signal import FULL_LOOK_SECONDS, ChangeSignal
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins
from fdcore.testing.counting import LISTS, CountingStore

NOW = datetime(2027, 1, 15, tzinfo=timezone.utc)


class Clock:
    """A monotonic clock the test moves (the readers' time.monotonic)."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def monotonic(self) -> float:
        return self.seconds


def finished_store(name: str) -> CountingStore:
    store = CountingStore(load_plugins().open_storage(f"memory://{name}"))
    mailbox = Mailbox(store)
    for n in range(3):
        request_id = f"r{n}"
        submit(mailbox, ["a"], request_id=request_id, now=NOW)
        attempt = Attempt(1, "etl-1", NOW, NOW, Outcome.SUCCEEDED)
        status = Status(request_id, State.SUCCEEDED, NOW, agent="etl-1", attempts=[attempt])
        mailbox.create(status_key(request_id), status)
    ChangeSignal(mailbox).moved()  # an agent's poll made the signal again
    return store


def lists(store: CountingStore) -> int:
    return sum(store.calls[name] for name in LISTS)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    fake = types.SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr("fdcore.environment.queue.time", fake)
    monkeypatch.setattr("fdcore.environment.changes.time", fake)
    return clock


def test_a_finished_queue_costs_one_read_a_look_until_a_submission(clock: Clock) -> None:
    store = finished_store("quiet-queue")
    reader = QueueReader(Mailbox(store))
    assert len(reader.rows()) == 3
    before, reads = lists(store), store.calls["read_bounded"] + store.calls["read"]
    for _ in range(5):
        clock.seconds += 5
        assert len(reader.rows()) == 3
    assert lists(store) == before
    assert store.calls["read_bounded"] + store.calls["read"] - reads == 5
    submit(Mailbox(store), ["a"], request_id="r9", now=NOW)
    clock.seconds += 5
    assert [row.id for row in reader.rows()][-1] == "r9"


def test_a_request_nobody_announced_shows_at_the_next_full_listing(clock: Clock) -> None:
    store = finished_store("quiet-unannounced")
    mailbox = Mailbox(store)
    reader = QueueReader(mailbox)
    reader.rows()
    mailbox.create(request_key("r9"), Request(id="r9", entities=["a"], created_at=NOW))
    clock.seconds += FULL_LOOK_SECONDS - 1
    assert len(reader.rows()) == 3  # not announced: not listed yet
    clock.seconds += 1
    assert len(reader.rows()) == 4


def test_changes_pay_one_read_while_everything_is_finished(clock: Clock) -> None:
    store = finished_store("quiet-changes")
    tracker = ChangeTracker(MailboxIndex(Mailbox(store)))
    assert tracker.look() == []
    before = lists(store)
    for _ in range(3):
        clock.seconds += 5
        assert tracker.look() == []
    assert lists(store) == before
    submit(Mailbox(store), ["a"], request_id="r9", now=NOW)
    clock.seconds += 5
    [change] = tracker.look()
    assert (change.request_id, change.state, change.previous) == ("r9", "waiting", None)
    clock.seconds += 5
    tracker.look()  # r9 waits: open, so every look lists
    assert lists(store) > before + 2


def test_a_reader_never_writes_the_signal(clock: Clock) -> None:
    store = CountingStore(load_plugins().open_storage("memory://quiet-read-only"))
    reader = QueueReader(Mailbox(store))
    for _ in range(3):
        reader.rows()
        clock.seconds += 5
    assert store.calls["create"] == 0  # no signal made: it lists each look instead
    assert lists(store) == 3 * 3
