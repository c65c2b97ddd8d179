"""Every write to a request's status, and the one rebase on our own write whose answer was lost."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest
from agent_parts_helpers import INSTANCE, Environment, attempt, held_by

from fdcore.abc import TableJob
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.work import Holdings, Work
from fdcore.contract.models import Outcome, State
from fdcore.errors import PreconditionFailed
from fdcore.testing.memory_fleet import START

LATER = START + timedelta(seconds=5)


def parts(
    env: Environment, name: str = "etl-01", **settings: object
) -> tuple[StatusChanges, Holdings]:
    config = env.config(name, **settings)
    holdings = env.holdings(config)
    return env.status_changes(config, holdings), holdings


def claimed(env: Environment, *tables: str) -> tuple[StatusChanges, Holdings, Work]:
    env.submit("r1", *(tables or ("sales",)))
    changes, holdings = parts(env)
    return changes, holdings, env.claimed(changes, holdings, "r1")


def lands_unseen(env: Environment, work: Work, **changes: object) -> None:
    """A write of ours lands, but its answer (the new etag) is lost: ``work`` keeps the old one."""
    env.write_status(attrs.evolve(work.status, **changes))


# -- creating a status ---------------------------------------------------------------------------


def test_a_claim_creates_the_status_and_holds_the_request(env: Environment) -> None:
    _, holdings, work = claimed(env)
    status = env.status("r1")
    assert (status.state, status.agent, status.attempt) == (State.ACCEPTED, "etl-01", 1)
    assert [(a.number, a.agent, a.instance) for a in status.attempts] == [(1, "etl-01", INSTANCE)]
    assert work.status == status and list(holdings.work) == ["r1"]


def test_a_claim_another_agent_made_first_holds_nothing(env: Environment) -> None:
    env.submit("r1", "sales")
    first, _ = parts(env, "etl-02")
    second, holdings = parts(env)
    request = env.mailbox.request("r1")
    assert request is not None
    first.claim(request.value, START)
    second.claim(request.value, START)
    assert env.status("r1").agent == "etl-02"
    assert holdings.work == {}


def test_expiring_writes_why_and_remembers_the_request_is_final(env: Environment) -> None:
    env.submit("r1", "sales", deadline=START + timedelta(minutes=1))
    changes, holdings = parts(env)
    request = env.mailbox.request("r1")
    assert request is not None
    changes.expire(request.value, START + timedelta(minutes=2))
    status = env.status("r1")
    assert (status.state, status.agent) == (State.EXPIRED, None)
    assert status.message == "not claimed before its deadline 2027-01-15T02:01:00Z"
    assert holdings.final == {"r1"}


# -- replacing a status this agent holds ----------------------------------------------------------


def test_start_table_done_and_succeed_each_replace_the_status(env: Environment) -> None:
    changes, holdings, work = claimed(env, "sales", "customers")
    assert changes.start(work, LATER)
    assert env.status("r1").state is State.RUNNING
    assert env.status("r1").attempts[0].started_at == LATER
    assert changes.table_done(work, "sales", LATER)
    assert changes.table_done(work, "sales", LATER)  # a retry records it once
    assert changes.table_done(work, "customers", LATER)
    assert env.status("r1").tables_done == ["sales", "customers"]
    assert changes.succeed(work, LATER)
    status = env.status("r1")
    assert status.state is State.SUCCEEDED
    assert [(a.outcome, a.ended_at) for a in status.attempts] == [(Outcome.SUCCEEDED, LATER)]
    assert holdings.work == {} and holdings.final == {"r1"}


def test_a_failed_request_says_why_in_the_status_and_the_attempt(env: Environment) -> None:
    changes, holdings, work = claimed(env)
    assert changes.fail(work, "table sales failed: boom", LATER)
    status = env.status("r1")
    assert (status.state, status.message) == (State.FAILED, "table sales failed: boom")
    assert status.attempts[-1].outcome is Outcome.FAILED
    assert status.attempts[-1].message == "table sales failed: boom"
    assert holdings.work == {} and holdings.final == {"r1"}


def test_a_status_another_agent_wrote_drops_the_request_and_writes_nothing(
    env: Environment,
) -> None:
    changes, holdings, work = claimed(env)
    work.run = env.start_table(TableJob("r1", "sales", 1, 1, "etl-01", env.storage.url))
    work.lease = env.leases.acquire("sales", "etl-01", "r1", 1, 60, START)
    taken = held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02"))
    env.write_status(taken)
    assert not changes.start(work, LATER)
    assert env.status("r1") == taken
    assert holdings.work == {}
    assert env.runs[0].cancelled
    lease = env.leases.current("sales")
    assert lease is not None and lease.released


def test_a_removed_status_drops_the_request(env: Environment) -> None:
    changes, holdings, work = claimed(env)
    env.storage.delete("status/r1.json")
    assert not changes.start(work, LATER)
    assert holdings.work == {}


def test_a_write_of_ours_whose_answer_was_lost_is_built_on(env: Environment) -> None:
    changes, holdings, work = claimed(env, "sales", "customers")
    changes.start(work, LATER)
    lands_unseen(env, work, tables_done=["sales"])
    assert changes.table_done(work, "customers", LATER)
    status = env.status("r1")
    assert status.tables_done == ["sales", "customers"]
    assert [(a.number, a.outcome) for a in status.attempts] == [(1, Outcome.RUNNING)]
    assert list(holdings.work) == ["r1"]


@pytest.mark.parametrize(("landed", "says"), [(State.SUCCEEDED, True), (State.FAILED, False)])
def test_a_final_write_of_ours_whose_answer_was_lost_ends_the_hold(
    env: Environment, landed: State, says: bool
) -> None:
    changes, holdings, work = claimed(env)
    changes.start(work, LATER)
    lands_unseen(env, work, state=landed)
    assert changes.succeed(work, LATER) is says  # True only if the landed end is this one
    assert env.status("r1").state is landed
    assert holdings.work == {} and holdings.final == {"r1"}


def test_a_status_that_keeps_changing_under_the_agent_is_given_up(env: Environment) -> None:
    changes, holdings, work = claimed(env)
    replace = env.storage.replace

    def replace_then_move(key: str, data: bytes, etag: str) -> str:
        # Each write meets a status of this same attempt moved on by a write it never saw.
        current = env.storage.read(key)
        assert current is not None
        replace(key, current.data, current.etag)
        raise PreconditionFailed(key, "etag changed (test)")

    env.storage.replace = replace_then_move  # type: ignore[method-assign]
    assert not changes.start(work, LATER)
    assert holdings.work == {}


def test_a_handed_back_claim_with_nothing_done_is_deleted(env: Environment) -> None:
    changes, holdings, work = claimed(env)
    changes.hand_back(work, LATER)
    assert env.mailbox.status("r1") is None  # any agent of any version sees it unclaimed
    assert holdings.work == {}


def test_a_handed_back_request_with_tables_done_keeps_them_and_names_no_agent(
    env: Environment,
) -> None:
    changes, holdings, work = claimed(env, "sales", "customers")
    changes.start(work, LATER)
    changes.table_done(work, "sales", LATER)
    changes.hand_back(work, LATER)
    status = env.status("r1")
    assert (status.state, status.agent, status.tables_done) == (State.ACCEPTED, None, ["sales"])
    assert [a.outcome for a in status.attempts] == [Outcome.STOPPED]
    assert holdings.work == {}


# -- taking over ----------------------------------------------------------------------------------


def take_over(env: Environment, lost: bool, **settings: object) -> tuple[Holdings, bool]:
    changes, holdings = parts(env, **settings)
    found = env.mailbox.status("r1")
    request = env.mailbox.request("r1")
    assert found is not None and request is not None
    changes.take_over(found, request.value, LATER, "test", lost=lost)
    return holdings, "r1" in holdings.work


def test_a_lost_agents_request_is_taken_over_as_a_new_attempt(env: Environment) -> None:
    env.submit("r1", "sales")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-02"), state=State.RUNNING))
    _, held = take_over(env, lost=True)
    status = env.status("r1")
    assert held and (status.state, status.agent, status.attempt) == (State.ACCEPTED, "etl-01", 2)
    assert [(a.agent, a.outcome) for a in status.attempts] == [
        ("etl-02", Outcome.LOST),
        ("etl-01", Outcome.RUNNING),
    ]
    assert status.attempts[-1].instance == INSTANCE


def test_a_handed_back_request_is_picked_up_without_counting_a_lost_attempt(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    stopped = attrs.evolve(attempt(1, "etl-02"), outcome=Outcome.STOPPED)
    env.write_status(held_by("r1", None, stopped))
    _, held = take_over(env, lost=False)
    status = env.status("r1")
    assert held and [a.outcome for a in status.attempts] == [Outcome.STOPPED, Outcome.RUNNING]


def test_the_last_allowed_lost_attempt_fails_the_request_naming_every_agent(
    env: Environment,
) -> None:
    env.submit("r1", "sales", max_attempts=2)
    first = attrs.evolve(attempt(1, "etl-02"), outcome=Outcome.LOST)
    env.write_status(held_by("r1", "etl-03", first, attempt(2, "etl-03")))
    holdings, held = take_over(env, lost=True)
    status = env.status("r1")
    assert not held and holdings.final == {"r1"}
    assert (status.state, status.message) == (
        State.FAILED,
        "failed after 2 lost attempts (agents: etl-02, etl-03)",
    )


def test_an_older_agents_status_without_attempts_gets_the_attempt_it_implies(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    env.write_status(held_by("r1", "etl-02", state=State.RUNNING))  # contract 1: no attempts
    take_over(env, lost=True)
    status = env.status("r1")
    assert [(a.number, a.agent, a.outcome) for a in status.attempts] == [
        (1, "etl-02", Outcome.LOST),
        (2, "etl-01", Outcome.RUNNING),
    ]


def test_a_takeover_another_agent_made_first_holds_nothing(env: Environment) -> None:
    env.submit("r1", "sales")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-02")))
    changes, holdings = parts(env)
    found = env.mailbox.status("r1")
    request = env.mailbox.request("r1")
    assert found is not None and request is not None
    env.write_status(held_by("r1", "etl-03", attempt(1, "etl-02"), attempt(2, "etl-03")))
    changes.take_over(found, request.value, LATER, "test", lost=True)
    assert env.status("r1").agent == "etl-03" and holdings.work == {}


# -- the ownership check ---------------------------------------------------------------------------


def test_still_held_brings_the_work_up_to_date_or_drops_it(env: Environment) -> None:
    changes, holdings, work = claimed(env)
    lands_unseen(env, work, state=State.RUNNING)
    assert changes.still_held(work)
    assert work.running and work.status == env.status("r1")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    assert not changes.still_held(work)
    assert holdings.work == {}
