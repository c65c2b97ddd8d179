"""A shared 2-second schedule on three real agents, while agents are SIGKILLed and restarted.

``make test`` kills ``FDCORE_SCHEDULE_KILLS`` times (default 6); ``make soak`` 45 times.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import pytest

from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.contract.models import State
from fdcore.environment.queue import queue_rows
from fdcore.testing.assertions import assert_each_table_succeeded_once

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.2, "stale_after": 2, "concurrency": 2, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 1, "lease_seconds": 2}
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
SCHEDULE = {"id": "tick", "shared": True, "entities": ["sales", "stock"], "every": "2s"}
KILLS = int(os.environ.get("FDCORE_SCHEDULE_KILLS", "6"))


def starts(agent: AgentProcess) -> int:
    """How many times the agent's process has come up (its log's first line each time)."""
    return agent.output().count(": running on ")


@pytest.mark.slow
def test_shared_schedule_survives_sigkill_and_restarts(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.3"
    names = ["etl-01", "etl-02", "etl-03"]
    for name in names:
        fleet.add(
            name, {"agent": AGENT, "pipeline": PIPELINE, "runner": RUNNER, "schedules": [SCHEDULE]}
        )
        fleet.agents[name].start()
    rng = random.Random(11)

    def every_slot_ended() -> bool:
        """Slots enough, and every slot's request so far final: taken-over ones too (new slots
        keep coming)."""
        rows = [row for row in queue_rows(mailbox) if row.schedule == "tick"]
        statuses = [mailbox.status(row.id) for row in rows]
        ended = all(status is not None and status.value.state.final for status in statuses)
        return ended and len(rows) >= KILLS

    try:
        # Kills start once every agent is up, and each waits for the last one's restart: on a
        # busy machine start-up takes seconds, and only one agent is down at a time, as the
        # fixed pace of old ensured on an idle one.
        assert wait_until(lambda: all(mailbox.agent(name) for name in names), 60)
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 3.0))
            victim = fleet.agents[rng.choice(names)]
            before = starts(victim)
            victim.kill()
            time.sleep(rng.uniform(0.2, 1.0))
            victim.start()
            assert wait_until(lambda: starts(victim) > before, 60), victim.output()  # noqa: B023
        # Taken-over and last slots finish: a killed agent's request waits out stale_after
        # and grace (3 s) before another takes it over.
        assert wait_until(every_slot_ended, 60)
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}, codes

    rows = [row for row in queue_rows(mailbox) if row.schedule == "tick"]
    slots = sorted(int(row.slot) for row in rows if row.slot)
    # One request per slot: file names are per slot, and no slot is missing while agents were up.
    assert len(slots) == len(set(slots))
    assert len(slots) >= KILLS  # a slot every 2 s, a kill every 2 s or more
    missing = set(range(slots[0], slots[-1] + 1)) - set(slots)
    assert len(missing) <= 1, missing  # only a slot during which all three were down could be
    # At most one successful run of each table of each slot, and every slot ended.
    for row in rows:
        status = mailbox.status(row.id)
        assert status is not None
        if status.value.state is State.SUCCEEDED:
            assert_each_table_succeeded_once(mailbox, row.id)
    finals = Counter(mailbox.status(row.id).value.state for row in rows)  # type: ignore[union-attr]
    assert finals[State.SUCCEEDED] >= len(rows) - 3, finals
