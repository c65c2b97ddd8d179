"""Cancel, retry and a request's story over an in-memory mailbox (the commands' functions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.codec import decode
from fdcore.contract.layout import cancel_key, retry_key
from fdcore.contract.models import (
    MAX_OUTPUT_BYTES,
    Cancel,
    Outcome,
    Retry,
    RunRecord,
    State,
    output_tail,
)
from fdcore.environment.views import request_story
from fdcore.errors import (
    InvalidId,
    MailboxFileError,
    RequestError,
    StorageUnavailable,
    UnknownRequest,
)
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.submit import retry_request, submit
from fdcore.plugins.manager import LEASES
from fdcore.testing.broken import BrokenStorage
from fdcore.testing.memory_fleet import START, MemoryFleet

FIXTURES = Path(__file__).parent / "fixtures" / "contract1"


def test_an_unclaimed_request_ends_cancelled_at_once(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    done = cancel_request(fleet.mailbox, "r1", by="ann", reason="wrong tables", now=START)
    assert done.created and done.state == "cancelled"
    agent = fleet.agent("etl-01")
    agent.poll()
    assert fleet.runs == []  # never claimed, never started
    story = request_story(fleet.mailbox, "r1")
    assert story.state == "cancelled"
    assert story.why == "cancelled by ann: wrong tables"
    assert story.to_json()["cancel"]["by"] == "ann"


def test_a_second_cancel_returns_the_first(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    agent = fleet.agent("etl-01")
    agent.poll()
    first = cancel_request(fleet.mailbox, "r1", by="ann", reason=None, now=START)
    again = cancel_request(fleet.mailbox, "r1", by="bob", reason=None, now=START)
    assert (first.created, again.created, again.cancel.by) == (True, False, "ann")
    assert again.state == "running"  # its holder stops it at its next poll


def test_a_held_request_stops_at_its_holders_next_poll(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a", "b", "c"], request_id="r1", now=START)
    agent = fleet.agent("etl-01")
    agent.poll()
    assert [run.job.table for run in fleet.runs] == ["a"]
    cancel_request(fleet.mailbox, "r1", by="ann", reason="stop", now=START)
    fleet.clock.advance(5)
    agent.poll()
    assert fleet.runs[0].cancelled
    assert agent.idle
    agent.poll()
    assert [run.job.table for run in fleet.runs] == ["a"]  # no later table started
    story = request_story(fleet.mailbox, "r1")
    assert story.state == "cancelled"
    assert [a.outcome for a in story.attempts] == ["cancelled"]
    assert [(r.table, r.outcome) for r in story.runs] == [("a", "cancelled")]
    lease = fleet.plugins.get(LEASES, "mailbox").open(fleet.storage, {}).current("a")
    assert lease is not None and lease.released


def test_a_final_request_cannot_be_cancelled(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    agent = fleet.agent("etl-01")
    agent.poll()
    fleet.finish_runs("r1")
    agent.poll()
    with pytest.raises(RequestError, match="r1 already ended succeeded; nothing to cancel"):
        cancel_request(fleet.mailbox, "r1", by="ann", reason=None, now=START)
    with pytest.raises(UnknownRequest, match="'nope' not found"):
        cancel_request(fleet.mailbox, "nope", by="ann", reason=None, now=START)
    with pytest.raises(InvalidId, match="invalid request id"):
        cancel_request(fleet.mailbox, "../x", by="ann", reason=None, now=START)


def test_a_retry_links_both_ways_and_runs_once(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a", "b", "c"], request_id="r1", now=START)
    agent = fleet.agent("etl-01")
    agent.poll()
    fleet.finish_runs("r1", succeeded=False)
    agent.poll()
    with pytest.raises(RequestError, match="table 'x' is not one of request r1's tables"):
        retry_request(fleet.mailbox, "r1", from_table="x", by="ann", now=START)
    retry = retry_request(fleet.mailbox, "r1", from_table="b", by="ann", now=START)
    assert (retry.retry_of, retry.entities) == ("r1", ["b", "c"])
    assert request_story(fleet.mailbox, "r1").retried_as == retry.id
    with pytest.raises(RequestError, match=f"already retried as {retry.id}"):
        retry_request(fleet.mailbox, "r1", from_table=None, by="ann", now=START)
    with pytest.raises(RequestError, match="is waiting"):
        retry_request(fleet.mailbox, retry.id, from_table=None, by="ann", now=START)
    agent.poll()
    fleet.finish_runs(retry.id)
    agent.poll()
    fleet.finish_runs(retry.id)
    agent.poll()
    story = request_story(fleet.mailbox, retry.id)
    assert story.state == State.SUCCEEDED.value
    assert [r.table for r in story.runs] == ["b", "c"]
    assert story.to_json()["retry_of"] == "r1"
    assert Outcome.CANCELLED.value == "cancelled"


def test_a_run_records_output_is_a_bounded_tail() -> None:
    lines = "".join(f"line {n:05d}\n" for n in range(1000))  # 11 000 bytes
    tail = output_tail(lines)
    assert len(tail.encode()) <= MAX_OUTPUT_BYTES
    assert tail.endswith("line 00999\n") and tail.startswith("line ")  # whole lines only
    assert output_tail("short\n") == "short\n"
    record = json.loads((FIXTURES / "run.json").read_text())
    record["output"] = "x" * (MAX_OUTPUT_BYTES + 1)
    with pytest.raises(MailboxFileError, match=r"001-t.json: output must be at most 4096 bytes"):
        decode(RunRecord, json.dumps(record).encode(), "runs/r/001-t.json")


def test_an_unclaimed_request_with_a_cancel_is_never_claimed(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    """The command stopped between its two writes: the cancel is there, no status yet."""
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    cancel = Cancel(request="r1", by="ann", at=START)
    fleet.mailbox.create(cancel_key("r1"), cancel)
    agent = fleet.agent("etl-01")
    agent.poll()
    assert fleet.runs == [] and agent.idle
    status = fleet.mailbox.status("r1")
    assert status is not None
    assert (status.value.state, status.value.agent, status.value.message) == (
        State.CANCELLED,
        None,
        "cancelled by ann",
    )


def test_a_handed_back_request_is_cancelled_at_once(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a", "b", "c"], request_id="r1", now=START)
    agent = fleet.agent("etl-01")
    agent.poll()
    fleet.finish_runs("r1")
    agent.poll()  # a done, b started
    agent.stop()
    fleet.finish_runs("r1")
    agent.poll()  # b done: handed back with c left (the last table's end would finish it)
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.agent is None
    assert status.value.state is State.ACCEPTED
    done = cancel_request(fleet.mailbox, "r1", by="ann", reason=None, now=START)
    assert done.state == "cancelled"
    story = request_story(fleet.mailbox, "r1")
    assert [a.outcome for a in story.attempts] == ["stopped"]
    assert story.why == "cancelled by ann"


def test_a_request_cancelled_before_its_takeover_never_starts_there(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a", "b"], request_id="r1", now=START)
    first = fleet.agent("etl-01", stale_after=10.0, grace_seconds=1.0)
    second = fleet.agent("etl-02", take_over=True, stale_after=10.0, grace_seconds=1.0)
    first.poll()
    assert [run.job.request for run in fleet.runs] == ["r1"]
    cancel_request(fleet.mailbox, "r1", by="ann", reason=None, now=START)  # etl-01 then dies
    fleet.clock.advance(30)
    second.poll()  # takes the lost agent's request over, sees the cancel, starts nothing
    assert len(fleet.runs) == 1 and second.idle
    story = request_story(fleet.mailbox, "r1")
    assert story.state == "cancelled"
    assert [(a.agent, a.outcome) for a in story.attempts] == [
        ("etl-01", "lost"),
        ("etl-02", "cancelled"),
    ]


class StatusOutage(BrokenStorage):
    """The fleet's store, whose status replaces fail (before applying) while ``down``."""

    def __init__(self, inner: MemoryStorage) -> None:
        super().__init__(inner)
        self.down = False

    def replace(self, key: str, data: bytes, etag: str) -> str:
        if self.down and key.startswith("status/"):
            raise StorageUnavailable(key, "replace failed (test outage)")
        return self.inner.replace(key, data, etag)


def test_a_stop_cut_short_by_a_store_error_is_finished_at_the_next_poll(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    store = fleet.wrap_storage(StatusOutage)
    submit(fleet.mailbox, ["a", "b"], request_id="r1", now=START)
    agent = fleet.agent("etl-01")
    agent.poll()
    cancel_request(fleet.mailbox, "r1", by="ann", reason=None, now=START)
    store.down = True
    fleet.clock.advance(5)
    agent.poll()  # the run is stopped, its status write fails
    assert fleet.runs[0].cancelled
    assert request_story(fleet.mailbox, "r1").state == "running"
    store.down = False
    fleet.clock.advance(5)
    agent.poll()
    story = request_story(fleet.mailbox, "r1")
    assert story.state == "cancelled" and agent.idle
    assert [(r.table, r.outcome) for r in story.runs] == [("a", "cancelled")]
    assert len(fleet.runs) == 1


def test_a_retry_cut_short_after_its_link_is_completed_by_the_next(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["a", "b"], request_id="r1", now=START)
    cancel_request(fleet.mailbox, "r1", by="ann", reason=None, now=START)
    link = Retry(request="r1", retry="r1-again", by="ann", at=START, from_table="b")
    fleet.mailbox.create(retry_key("r1"), link)  # the command stopped here
    done = retry_request(fleet.mailbox, "r1", from_table=None, by="bob", now=START)
    assert (done.id, done.entities, done.retry_of) == ("r1-again", ["b"], "r1")
    # A request that took the link's id is not the retry: a clear refusal, nothing written.
    submit(fleet.mailbox, ["x"], request_id="r2", now=START)
    cancel_request(fleet.mailbox, "r2", by="ann", reason=None, now=START)
    fleet.mailbox.create(retry_key("r2"), Retry(request="r2", retry="r3", by="ann", at=START))
    submit(fleet.mailbox, ["x"], request_id="r3", now=START)
    with pytest.raises(RequestError, match="r2 was already retried as r3"):
        retry_request(fleet.mailbox, "r2", from_table=None, by="bob", now=START)
