"""Real ``fdcore agent run`` processes sharing one local-folder environment."""

from __future__ import annotations

import random
import signal
from collections import Counter

import pytest

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import assert_no_double_writers
from fdcore.testing.tables import table_writes

pytestmark = pytest.mark.processes

FAST = {"poll_seconds": 0.1, "stale_after": 5, "concurrency": 2, "shutdown_grace": 20}
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


@pytest.mark.slow
def test_three_agents_drain_300_requests_exactly_once(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    for n in range(3):
        fleet.add(f"etl-{n}", {"agent": FAST, "pipeline": {"claim": "when_free"}, "runner": RUNNER})
    rng = random.Random(3)
    tables = [f"table{t:02d}" for t in range(30)]
    for n in range(300):
        submit(mailbox, rng.sample(tables, 2), request_id=f"r{n:03d}")
    for agent in fleet:
        agent.start()
    try:
        assert wait_until(
            lambda: all(row.state == "succeeded" for row in queue_rows(mailbox)), timeout=240
        ), Counter(row.state for row in queue_rows(mailbox))
    finally:
        codes = fleet.stop_all()
    assert codes == {"etl-0": 0, "etl-1": 0, "etl-2": 0}

    rows = queue_rows(mailbox)
    assert len(rows) == 300
    writes = table_writes(fleet)
    accepted = [w for w in writes if not w.rejected]
    # Every table of every request ran exactly once, by one agent, in one attempt.
    assert Counter((w.request, w.table) for w in accepted) == {
        (row.id, table): 1
        for row in rows
        for table in mailbox.request(row.id).value.entities  # type: ignore[union-attr]
    }
    assert [w for w in writes if w.rejected] == []
    assert_no_double_writers(writes)
    assert all(len(row.attempts) == 1 for row in rows)
    shares = Counter(row.agent for row in rows)
    assert set(shares) == {"etl-0", "etl-1", "etl-2"}, shares  # the work was shared out


def test_sigterm_lets_running_tables_finish_and_hands_back_the_rest(
    fdcore_fleet: AgentFleet,
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "1.5"
    agent = fleet.add(
        "etl-0",
        {"agent": {**FAST, "concurrency": 1}, "pipeline": {"claim": "always"}, "runner": RUNNER},
    )
    for n in range(3):
        submit(mailbox, ["a", "b"], request_id=f"r{n}")
    agent.start()
    assert wait_until(lambda: any(r.state == "running" for r in queue_rows(mailbox)), 20)
    agent.signal(signal.SIGTERM)
    assert agent.wait(30) == 0
    states = {row.id: row for row in queue_rows(mailbox)}
    record = mailbox.agent("etl-0")
    assert record is not None and record.value.stopped_at is not None
    assert record.value.running == 0
    # The request that was running finished its table and was handed back with its progress;
    # the two claimed but never started are plain unclaimed requests again.
    running = [row for row in states.values() if row.attempts]
    assert len(running) == 1
    status = mailbox.status(running[0].id)
    assert status is not None
    assert status.value.state is State.ACCEPTED and status.value.agent is None
    assert status.value.tables_done == ["a"]
    assert sorted(row.state for row in states.values()) == ["accepted", "waiting", "waiting"]


def test_a_second_process_with_the_same_name_is_refused(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    first = fleet.add("etl-0", {"agent": FAST, "runner": RUNNER}).start()
    assert wait_until(lambda: mailbox.agent("etl-0") is not None, 20)
    second = fleet.add("etl-0-again", {"agent": {**FAST, "name": "etl-0"}, "runner": RUNNER})
    second.start()
    assert second.wait(20) == 2
    assert "agent 'etl-0' is already running" in second.output()
    assert first.alive()
    assert first.stop() == 0
