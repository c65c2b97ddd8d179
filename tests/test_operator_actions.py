"""Cancel, retry and a request's story over an in-memory mailbox (the commands' functions)."""

from __future__ import annotations

import pytest

from fdcore.cli.views import request_story
from fdcore.contract.models import Outcome, State
from fdcore.errors import InvalidId, RequestError, UnknownRequest
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.submit import retry_request, submit
from fdcore.plugins.manager import LEASES
from fdcore.testing.memory_fleet import START, MemoryFleet


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
