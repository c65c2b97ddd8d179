"""Looking for work: the sweep of requests under way, then unclaimed requests and expiries."""

from __future__ import annotations

from datetime import timedelta

import attrs
from agent_parts_helpers import INSTANCE, Environment, attempt, held_by

from fdcore.contract.layout import request_key
from fdcore.contract.models import AgentRecord, Outcome, Request, State
from fdcore.testing.memory_fleet import START

STALE = 60 + 60 + 1  # past the default stale_after and grace: an agent this silent is lost


def last_seen(env: Environment, agent: str, seconds: float) -> None:
    """``agent``'s status record, last written ``seconds`` after START."""
    record = AgentRecord(name=agent, updated_at=START + timedelta(seconds=seconds), stale_after=60)
    env.mailbox.create(f"agents/{agent}.json", record)


def handed_back(env: Environment, request_id: str, minutes: int = 0) -> None:
    env.submit(request_id, "sales", now=START + timedelta(minutes=minutes))
    stopped = attrs.evolve(attempt(1, "etl-02"), outcome=Outcome.STOPPED)
    env.write_status(held_by(request_id, None, stopped))


# -- unclaimed requests ---------------------------------------------------------------------------


def test_unclaimed_requests_are_claimed_oldest_first_as_the_policy_allows(
    env: Environment,
) -> None:
    env.submit("r2", "sales", now=START + timedelta(seconds=1))
    env.submit("r1", "sales")
    polite, held = env.discovery(env.config(claim="when_free"))
    polite.look_for_work(START)
    assert list(held.work) == ["r1"]
    greedy, held = env.discovery(env.config("etl-02", claim="always"))
    greedy.look_for_work(START)
    assert list(held.work) == ["r2"]  # all that was left


def test_a_request_past_its_deadline_is_expired_even_without_room(env: Environment) -> None:
    env.submit("r1", "sales")
    env.submit("r2", "sales", deadline=START + timedelta(minutes=1))
    discovery, held = env.discovery(env.config(claim="when_free"))
    discovery.look_for_work(START + timedelta(minutes=2))
    assert list(held.work) == ["r1"]
    assert env.status("r2").state is State.EXPIRED and held.final == {"r2"}


def test_a_request_with_another_agents_affinity_is_left_to_it(env: Environment) -> None:
    theirs = Request(id="r1", entities=["sales"], created_at=START, affinity="etl-02")
    env.mailbox.create(request_key("r1"), theirs)
    discovery, held = env.discovery(env.config())
    discovery.look_for_work(START)
    assert held.work == {} and env.mailbox.status("r1") is None


def test_a_request_whose_id_does_not_match_its_file_is_reported_and_skipped(
    env: Environment,
) -> None:
    env.mailbox.create(request_key("r1"), Request(id="r9", entities=["t"], created_at=START))
    discovery, held = env.discovery(env.config())
    discovery.look_for_work(START)
    assert held.work == {}
    assert env.mailbox.problems.reported == [
        "requests/r1.json: field 'id': 'r9' does not match the file name"
    ]


# -- the sweep: requests under way ----------------------------------------------------------------


def test_its_own_request_left_by_an_earlier_process_is_resumed_as_a_new_attempt(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    env.write_status(held_by("r1", "etl-01", attempt(1, "etl-01", instance="earlier")))
    discovery, held = env.discovery(env.config())
    discovery.look_for_work(START)
    status = env.status("r1")
    assert list(held.work) == ["r1"] and status.attempt == 2
    assert [(a.agent, a.outcome) for a in status.attempts] == [
        ("etl-01", Outcome.LOST),
        ("etl-01", Outcome.RUNNING),
    ]


def test_a_claim_of_this_process_whose_answer_was_lost_is_held_as_it_is(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    ours = held_by("r1", "etl-01", attempt(1, "etl-01", instance=INSTANCE))
    env.write_status(ours)
    discovery, held = env.discovery(env.config())
    discovery.look_for_work(START)
    assert held.work["r1"].status == ours == env.status("r1")  # no new attempt, nothing written


def test_a_handed_back_request_is_picked_up(env: Environment) -> None:
    handed_back(env, "r1")
    discovery, held = env.discovery(env.config())
    discovery.look_for_work(START)
    status = env.status("r1")
    assert list(held.work) == ["r1"]
    assert [(a.agent, a.outcome) for a in status.attempts] == [
        ("etl-02", Outcome.STOPPED),
        ("etl-01", Outcome.RUNNING),
    ]


def test_a_lost_agents_request_is_taken_over_only_with_take_over(env: Environment) -> None:
    env.submit("r1", "sales")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-02")))
    last_seen(env, "etl-02", 0)
    patient, held = env.discovery(env.config())
    patient.look_for_work(START + timedelta(seconds=STALE))
    assert held.work == {}
    taker, held = env.discovery(env.config("etl-03", take_over=True))
    taker.look_for_work(START + timedelta(seconds=STALE))
    assert list(held.work) == ["r1"]
    assert [a.outcome for a in env.status("r1").attempts] == [Outcome.LOST, Outcome.RUNNING]


def test_a_live_agents_request_and_one_whose_agent_has_no_record_stay_put(
    env: Environment,
) -> None:
    for request_id, agent in (("r1", "etl-02"), ("r2", "etl-03")):
        env.submit(request_id, "sales")
        env.write_status(held_by(request_id, agent, attempt(1, agent)))
    last_seen(env, "etl-02", STALE - 10)  # etl-02 wrote its record 10 s ago; etl-03 never did
    taker, held = env.discovery(env.config(take_over=True))
    taker.look_for_work(START + timedelta(seconds=STALE))
    assert held.work == {}


def test_requests_under_way_come_before_newer_unclaimed_ones(env: Environment) -> None:
    env.submit("r1", "sales")
    handed_back(env, "r2", minutes=1)
    discovery, held = env.discovery(env.config(claim="when_free"))
    discovery.look_for_work(START + timedelta(minutes=2))
    assert list(held.work) == ["r2"]


def test_no_room_left_ends_the_sweep(env: Environment) -> None:
    handed_back(env, "r1")
    handed_back(env, "r2")
    discovery, held = env.discovery(env.config(claim="when_free"))
    discovery.look_for_work(START)
    assert list(held.work) == ["r1"]
    assert env.status("r2").agent is None


def test_without_take_over_the_sweep_runs_once_per_stale_after(env: Environment) -> None:
    discovery, held = env.discovery(env.config())
    discovery.look_for_work(START)  # the first look always sweeps
    handed_back(env, "r1")
    discovery.look_for_work(START + timedelta(seconds=59))
    assert held.work == {}
    discovery.look_for_work(START + timedelta(seconds=60))
    assert list(held.work) == ["r1"]


def test_with_take_over_the_sweep_runs_at_every_look(env: Environment) -> None:
    discovery, held = env.discovery(env.config(take_over=True))
    discovery.look_for_work(START)
    handed_back(env, "r1")
    discovery.look_for_work(START + timedelta(seconds=5))
    assert list(held.work) == ["r1"]


def test_a_waiting_request_is_re_read_and_let_go_once_another_agent_holds_it(
    env: Environment,
) -> None:
    env.submit("r0", "customers", now=START - timedelta(seconds=1))
    env.submit("r1", "sales")
    discovery, held = env.discovery(env.config(take_over=True, concurrency=1, claim="always"))
    discovery.look_for_work(START)  # claims r0 running (a worker is free) and r1 waiting
    assert (held.work["r0"].running, held.work["r1"].running) == (True, False)
    waiting = held.work["r1"]
    moved = attrs.evolve(waiting.status, message="still ours, rewritten")
    env.write_status(moved)
    discovery.look_for_work(START + timedelta(seconds=5))
    assert waiting.status == moved and held.work["r1"] is waiting  # brought up to date
    env.write_status(held_by("r1", "etl-02", *moved.attempts, attempt(2, "etl-02")))
    last_seen(env, "etl-02", 10)
    discovery.look_for_work(START + timedelta(seconds=10))
    assert list(held.work) == ["r0"]  # r1 let go (finding 8); etl-02 is live, not taken back


def test_a_request_whose_table_holds_its_lease_is_left_to_its_tables(env: Environment) -> None:
    env.submit("r1", "sales")
    discovery, held = env.discovery(env.config(take_over=True))
    discovery.look_for_work(START)
    work = held.work["r1"]
    assert work.running  # claimed running: a worker was free
    work.lease = env.leases.acquire("sales", "etl-01", "r1", 1, 60, START)  # its table's lease
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    discovery.look_for_work(START + timedelta(seconds=5))
    assert list(held.work) == ["r1"]  # its next renewal or status update finds out


def test_a_running_request_waiting_for_its_tables_lease_is_re_read(env: Environment) -> None:
    # Running, but its table's lease is another's: no renewal would re-read its status, so the
    # sweep does (finding 8, for a request that got a worker but not yet its lease).
    env.submit("r1", "sales")
    discovery, held = env.discovery(env.config(take_over=True))
    discovery.look_for_work(START)
    assert held.work["r1"].running and held.work["r1"].lease is None
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    last_seen(env, "etl-02", 5)
    discovery.look_for_work(START + timedelta(seconds=5))
    assert held.work == {}  # let go; etl-02 is live, so not taken back


def test_a_final_status_is_never_read_again(env: Environment) -> None:
    env.submit("r1", "sales")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-02"), state=State.SUCCEEDED))
    discovery, held = env.discovery(env.config(take_over=True))
    discovery.look_for_work(START)
    assert held.final == {"r1"}
    blob = env.storage.read("status/r1.json")
    assert blob is not None
    env.storage.replace("status/r1.json", b"{not json", blob.etag)
    discovery.look_for_work(START + timedelta(seconds=5))
    assert env.mailbox.problems.reported == []  # not read, so not found malformed
