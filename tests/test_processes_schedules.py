"""A shared 2-second schedule on three real agents, while agents are SIGKILLed and restarted."""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from fdcore.cli.fleet import AgentFleet
from fdcore.contract.models import State
from fdcore.environment import queue_rows
from fdcore.testing.assertions import assert_each_table_succeeded_once

AGENT = {"poll_seconds": 0.2, "stale_after": 2, "concurrency": 2, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 1, "lease_seconds": 2}
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
SCHEDULE = {"id": "tick", "shared": True, "entities": ["sales", "stock"], "every": "2s"}


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
    kills = 0
    started = time.monotonic()
    try:
        while time.monotonic() - started < 40:
            time.sleep(rng.uniform(1.0, 3.0))
            victim = fleet.agents[rng.choice(names)]
            if victim.alive():
                victim.kill()
                kills += 1
                time.sleep(rng.uniform(0.2, 1.0))
                victim.start()
        time.sleep(12)  # let taken-over and last slots finish
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}, codes
    assert kills >= 10

    rows = [row for row in queue_rows(mailbox) if row.schedule == "tick"]
    slots = sorted(int(row.slot) for row in rows if row.slot)
    # One request per slot: file names are per slot, and no slot is missing while agents were up.
    assert len(slots) == len(set(slots))
    assert len(slots) >= 20
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
