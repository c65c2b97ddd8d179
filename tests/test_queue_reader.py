"""The queue read through one reader kept between looks (fdcore.environment.queue.QueueReader):
``fdcore queue --watch`` reads each request file and final status once, whatever the frames."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from fdcore.cli import commands
from fdcore.cli.main import main
from fdcore.contract.layout import status_key
from fdcore.contract.models import Attempt, Outcome, State, Status
from fdcore.environment import QueueFilter, queue_page
from fdcore.environment.queue import QueueReader
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins
from fdcore.testing.counting import CountingStore

FINISHED = 40


def finished_environment(name: str) -> Any:
    memory = load_plugins().open_storage(f"memory://{name}")
    mailbox = Mailbox(memory)
    now = datetime.now(timezone.utc)
    for n in range(FINISHED):
        request_id = f"r{n:03d}"
        submit(mailbox, ["a"], request_id=request_id, now=now)
        attempt = Attempt(1, "etl-1", now, now, Outcome.SUCCEEDED)
        status = Status(request_id, State.SUCCEEDED, now, agent="etl-1", attempts=[attempt])
        mailbox.create(status_key(request_id), status)
    submit(mailbox, ["a"], request_id="waiting-1", now=now)
    return memory


def test_queue_watch_reads_each_finished_file_once_over_its_frames(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = CountingStore(finished_environment("watch-reads"))
    monkeypatch.setattr(
        commands.Environment, "open", classmethod(lambda cls, url: cls(Mailbox(store)))
    )
    assert (
        main(
            ["queue", "--env", "memory://watch-reads", "--watch", "0.01", "--count", "3", "--json"]
        )
        == 0
    )
    frames = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(frames) == 3 and all(len(f["requests"]) == FINISHED + 1 for f in frames)
    # each request once, each status once, not once per frame; the waiting request's status,
    # not listed, once too (something unlistable in its place, an empty folder, is unreadable);
    # and the change signal, read before the first listing (nothing known open yet)
    assert store.calls["read"] + store.calls["read_bounded"] == 2 * FINISHED + 2 + 1


def test_a_page_of_the_queue_is_newest_first_filtered_and_counted() -> None:
    reader = QueueReader(Mailbox(finished_environment("queue-page")))
    rows = reader.rows()
    page = queue_page(rows, QueueFilter(state="succeeded", text="R03"), offset=5, limit=3)
    assert [row.id for row in page.rows] == ["r034", "r033", "r032"]
    assert page.matching == 10 and page.offset == 5 and page.has_next
    assert page.counts == {"succeeded": FINISHED, "waiting": 1}
    assert page.agents == ["etl-1"]
    last = queue_page(rows, QueueFilter(), offset=1000, limit=30)
    assert last.offset == 30 and [row.id for row in last.rows][-1] == "r000"
    assert not last.has_next
    assert queue_page(rows, QueueFilter(agent="nobody"), 0, 10).matching == 0


def test_a_look_with_the_same_listings_keeps_its_rows_and_any_change_is_seen(
    tmp_path: Any,
) -> None:
    """A look whose versioned listings equal the last one's keeps its rows (no pass over them);
    a status written or replaced, a cancel written, a request gone or new shows at the next."""
    store = CountingStore(load_plugins().open_storage((tmp_path / "env").as_uri()))
    mailbox = Mailbox(store)
    now = datetime.now(timezone.utc)
    for request_id in ("r1", "r2", "r3"):
        submit(mailbox, ["a"], request_id=request_id, now=now)
    mailbox.create(status_key("r1"), Status("r1", State.RUNNING, now, agent="etl-1"))
    reader = QueueReader(mailbox)
    reader.rows().clear()  # a caller's list is its own
    store.calls.clear()
    states = [(row.id, row.state) for row in reader.rows()]
    assert states == [("r1", "running"), ("r2", "waiting"), ("r3", "waiting")]
    assert sum(store.beyond_lists().values()) == 0  # the same listings: nothing read

    cancel_request(mailbox, "r1", by="alice", reason=None, now=now)  # held: a cancel file
    mailbox.create(status_key("r2"), Status("r2", State.RUNNING, now, agent="etl-1"))
    rows = {row.id: row for row in reader.rows()}
    assert rows["r1"].cancelled_by == "alice" and rows["r2"].state == "running"

    held = mailbox.status("r2")
    assert held is not None
    done = Status("r2", State.SUCCEEDED, now, agent="etl-1")
    mailbox.replace(status_key("r2"), done, held.etag)
    submit(mailbox, ["a"], request_id="r4", now=now)
    store.delete("requests/r3.json")
    rows = {row.id: row for row in reader.rows()}
    assert rows["r2"].state == "succeeded" and rows["r4"].state == "waiting"
    assert "r3" not in rows
