from __future__ import annotations

from conftest import START, Fleet

from fdcore.contract.models import Outcome, State
from fdcore.mailbox.submit import submit


def test_two_tables_run_in_order_under_leases(fleet: Fleet) -> None:
    agent = fleet.agent("etl-01")
    submit(fleet.mailbox, ["sales", "customers"], request_id="r1", now=START)
    agent.poll()
    assert [run.job.table for run in fleet.runs] == ["sales"]
    assert fleet.runs[0].job.fencing_token == 1
    fleet.finish_all()
    agent.poll()
    assert [run.job.table for run in fleet.runs] == ["sales", "customers"]
    fleet.finish_all()
    agent.poll()
    status = fleet.mailbox.status("r1")
    assert status is not None
    assert status.value.state is State.SUCCEEDED
    assert status.value.tables_done == ["sales", "customers"]
    assert [a.outcome for a in status.value.attempts] == [Outcome.SUCCEEDED]
    runs = fleet.mailbox.runs("r1")
    assert [(r.table, r.agent, r.attempt) for r in runs] == [
        ("customers", "etl-01", 1),
        ("sales", "etl-01", 1),
    ]


def test_when_free_leaves_requests_for_an_agent_with_room(fleet: Fleet) -> None:
    busy = fleet.agent("busy", claim="when_free", concurrency=1)
    idle = fleet.agent("idle", claim="when_free", concurrency=1)
    for n in range(2):
        submit(fleet.mailbox, ["t"], request_id=f"r{n}", now=START)
    busy.poll()
    assert sorted(busy.held) == ["r0"]
    idle.poll()
    assert sorted(idle.held) == ["r1"]


def test_always_claims_everything_seen(fleet: Fleet) -> None:
    greedy = fleet.agent("greedy", claim="always", concurrency=1)
    for n in range(3):
        submit(fleet.mailbox, [f"t{n}"], request_id=f"r{n}", now=START)
    greedy.poll()
    assert sorted(greedy.held) == ["r0", "r1", "r2"]
    assert sum(work.running for work in greedy.held.values()) == 1


def test_failed_table_fails_the_request(fleet: Fleet) -> None:
    agent = fleet.agent("etl-01")
    submit(fleet.mailbox, ["sales", "customers"], request_id="r1", now=START)
    agent.poll()
    fleet.finish_all(succeeded=False)
    agent.poll()
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.state is State.FAILED
    assert status.value.message == "table sales failed: boom"
    assert len(fleet.runs) == 1
