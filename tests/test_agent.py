from __future__ import annotations

from fdcore.contract.models import Outcome, State
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet


def test_two_tables_run_in_order_under_leases(fdcore_memory_fleet: MemoryFleet) -> None:
    agent = fdcore_memory_fleet.agent("etl-01")
    submit(fdcore_memory_fleet.mailbox, ["sales", "customers"], request_id="r1", now=START)
    agent.poll()
    assert [run.job.table for run in fdcore_memory_fleet.runs] == ["sales"]
    assert fdcore_memory_fleet.runs[0].job.fencing_token == 1
    fdcore_memory_fleet.finish_runs()
    agent.poll()
    assert [run.job.table for run in fdcore_memory_fleet.runs] == ["sales", "customers"]
    fdcore_memory_fleet.finish_runs()
    agent.poll()
    status = fdcore_memory_fleet.mailbox.status("r1")
    assert status is not None
    assert status.value.state is State.SUCCEEDED
    assert status.value.tables_done == ["sales", "customers"]
    assert [a.outcome for a in status.value.attempts] == [Outcome.SUCCEEDED]
    runs = fdcore_memory_fleet.mailbox.runs("r1")
    assert [(r.table, r.agent, r.attempt) for r in runs] == [
        ("customers", "etl-01", 1),
        ("sales", "etl-01", 1),
    ]


def test_when_free_leaves_requests_for_an_agent_with_room(fdcore_memory_fleet: MemoryFleet) -> None:
    busy = fdcore_memory_fleet.agent("busy", claim="when_free", concurrency=1)
    idle = fdcore_memory_fleet.agent("idle", claim="when_free", concurrency=1)
    for n in range(2):
        submit(fdcore_memory_fleet.mailbox, ["t"], request_id=f"r{n}", now=START)
    busy.poll()
    assert sorted(busy.held) == ["r0"]
    idle.poll()
    assert sorted(idle.held) == ["r1"]


def test_always_claims_everything_seen(fdcore_memory_fleet: MemoryFleet) -> None:
    greedy = fdcore_memory_fleet.agent("greedy", claim="always", concurrency=1)
    for n in range(3):
        submit(fdcore_memory_fleet.mailbox, [f"t{n}"], request_id=f"r{n}", now=START)
    greedy.poll()
    assert sorted(greedy.held) == ["r0", "r1", "r2"]
    assert sum(work.running for work in greedy.held.values()) == 1


def test_a_freed_worker_takes_the_oldest_waiting_request_as_workers_free(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    greedy = fleet.agent("greedy", claim="always", concurrency=2)
    for n in range(5):
        submit(fleet.mailbox, [f"t{n}"], request_id=f"r{n}", now=START)
    greedy.poll()
    assert [run.job.request for run in fleet.runs] == ["r0", "r1"]
    fleet.finish_runs("r0")
    greedy.poll()  # r0's table recorded and the request finished: one worker for the oldest
    assert [run.job.request for run in fleet.runs] == ["r0", "r1", "r2"]
    fleet.finish_runs()
    greedy.poll()
    assert [run.job.request for run in fleet.runs] == ["r0", "r1", "r2", "r3", "r4"]
    assert sum(work.running for work in greedy.held.values()) == 2


def test_failed_table_fails_the_request(fdcore_memory_fleet: MemoryFleet) -> None:
    agent = fdcore_memory_fleet.agent("etl-01")
    submit(fdcore_memory_fleet.mailbox, ["sales", "customers"], request_id="r1", now=START)
    agent.poll()
    fdcore_memory_fleet.finish_runs(succeeded=False)
    agent.poll()
    status = fdcore_memory_fleet.mailbox.status("r1")
    assert status is not None and status.value.state is State.FAILED
    assert status.value.message == "table sales failed: boom"
    assert len(fdcore_memory_fleet.runs) == 1
