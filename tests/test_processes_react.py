"""Real agents at the default poll: tables back to back, new requests seen at once.

Before agents reacted between polls, each table waited for a poll (5 s by default): the three
tables below took 15 s or more, and an idle agent saw a new request up to 5 s late. The bounds
here are a third of that, to stay clear of a slow, shared machine; docs/benchmarks.md has the
measured figures.
"""

from __future__ import annotations

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit
from fdcore.testing.tables import table_writes

AGENT = {"poll_seconds": 5, "stale_after": 30, "concurrency": 1, "shutdown_grace": 20}
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


def succeeded(fleet: AgentFleet, request: str) -> bool:
    status = fleet.mailbox.status(request)
    return status is not None and status.value.state is State.SUCCEEDED


def test_a_request_of_three_tables_takes_less_than_one_poll(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    agent = fleet.add("etl-01", {"agent": AGENT, "runner": RUNNER}).start()
    try:
        assert wait_until(lambda: fleet.mailbox.agent("etl-01") is not None, timeout=30)
        submit(fleet.mailbox, ["sales", "stock", "orders"], request_id="r1")
        assert wait_until(lambda: succeeded(fleet, "r1"), timeout=4.5), agent.output()
    finally:
        assert fleet.stop_all() == {"etl-01": 0}
    assert [w.table for w in table_writes(fleet)] == ["sales", "stock", "orders"]


def test_a_freed_worker_takes_the_next_queued_request_at_once(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    for n in range(4):
        submit(fleet.mailbox, [f"table{n}"], request_id=f"r{n}")
    agent = fleet.add(
        "etl-01", {"agent": AGENT, "pipeline": {"claim": "when_free"}, "runner": RUNNER}
    ).start()
    try:
        # One worker, four queued requests: one poll, then each end frees the worker.
        assert wait_until(lambda: all(succeeded(fleet, f"r{n}") for n in range(4)), 4.5), (
            agent.output()
        )
    finally:
        assert fleet.stop_all() == {"etl-01": 0}


def test_an_idle_agent_sees_a_submitted_request_at_once(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    agent = fleet.add("etl-01", {"agent": AGENT, "runner": RUNNER}).start()
    try:
        # Its first poll found nothing; the next is 5 s away. The local folder tells it.
        assert wait_until(lambda: fleet.mailbox.agent("etl-01") is not None, timeout=30)
        submit(fleet.mailbox, ["sales"], request_id="r1")
        assert wait_until(lambda: succeeded(fleet, "r1"), timeout=2), agent.output()
    finally:
        assert fleet.stop_all() == {"etl-01": 0}
