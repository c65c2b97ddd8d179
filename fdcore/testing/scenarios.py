"""Whole fleet scenarios a backend proves itself with, on ``fdcore_fleet``'s real agents.

Each starts three agents with the sections it is given (the table function must be
:func:`fdcore.testing.tables.write_table`, which logs every write), drives the scenario, stops
the fleet and asserts the outcome, raising ``AssertionError`` with what it saw::

    def test_takeover(fdcore_fleet):
        takeover_after_sigkill(fdcore_fleet, SECTIONS, within=2 + 1 + 0.3 + 2)

A backend's tests point ``fdcore_environment`` and ``fdcore_storage_options`` at its store
(docs/plugins.md, "Testing a plugin"); plugins/onelake and plugins/s3 do so on their emulators.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import Outcome, State
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import (
    assert_each_table_succeeded_once,
    assert_no_double_writers,
    assert_taken_over,
    holder,
)
from fdcore.testing.tables import table_writes

__all__ = [
    "Sections",
    "drained",
    "outage_mid_run",
    "takeover_after_sigkill",
]

Sections = dict[str, Any]


def drained(fleet: AgentFleet) -> bool:
    """Every request of the fleet's environment has succeeded."""
    return all(row.state == "succeeded" for row in queue_rows(fleet.mailbox))


def _state(fleet: AgentFleet, request: str) -> State | None:
    found = fleet.mailbox.status(request)
    return None if found is None else found.value.state


def takeover_after_sigkill(fleet: AgentFleet, sections: Sections, *, within: float) -> str:
    """One request of two 2-second tables; its holder is SIGKILLed. Another agent takes it over
    within ``within`` seconds of the victim's last heartbeat, it succeeds with each table run
    once and no table written by two agents at once, and each survivor measured its clock
    against the store's (within 2 s: one machine). Returns the victim's name."""
    mailbox = fleet.mailbox
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "2"
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "2"
    submit(mailbox, ["sales", "stock"], request_id="r1")
    for n in range(3):
        fleet.add(f"etl-0{n}", sections).start()
    try:
        assert wait_until(lambda: holder(mailbox, "r1") is not None, 30)
        victim = holder(mailbox, "r1")
        assert victim is not None
        fleet.agents[victim].kill()
        assert_taken_over(mailbox, "r1", victim, within=within, timeout=30)
        assert wait_until(lambda: _state(fleet, "r1") is State.SUCCEEDED, 60)
    finally:
        fleet.stop_all()
    found = mailbox.status("r1")
    assert found is not None
    status = found.value
    assert [a.outcome for a in status.attempts] == [Outcome.LOST, Outcome.SUCCEEDED]
    assert status.attempts[0].agent == victim
    assert_each_table_succeeded_once(mailbox, "r1")
    assert_no_double_writers(table_writes(fleet))
    # A skewed agent would refuse to take over. (The victim may have written only its first
    # record, which no measurement precedes.)
    for name in set(fleet.agents) - {victim}:
        record = mailbox.agent(name)
        assert record is not None and record.value.clock_skew is not None, name
        assert abs(record.value.clock_skew) < 2.0, (name, record.value.clock_skew)
    return victim


def outage_mid_run(
    fleet: AgentFleet,
    sections: Sections,
    *,
    down: Callable[[], None],
    up: Callable[[], None],
    requests: int = 12,
    seconds: float = 7.0,
) -> None:
    """``requests`` requests of two tables; once one has succeeded the store goes ``down()``
    for ``seconds`` (longer than a backend's few seconds of retries), then comes ``up()``.
    Every agent lives through it and reports it, and every request succeeds with each table
    run once and no two writers. Give records and leases that outlast the outage (as the
    defaults do): an outage past ``stale_after`` is the fault suite's."""
    mailbox = fleet.mailbox
    for n in range(requests):
        submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
    for n in range(3):
        fleet.add(f"etl-0{n}", sections).start()
    try:
        assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 30)
        down()
        time.sleep(seconds)
        assert all(agent.alive() for agent in fleet)
        up()
        assert wait_until(lambda: drained(fleet), 90), Counter(
            row.state for row in queue_rows(mailbox)
        )
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}
    rows = queue_rows(mailbox)
    assert len(rows) == requests
    for row in rows:
        assert_each_table_succeeded_once(mailbox, row.id)
    assert_no_double_writers(table_writes(fleet))
    # The backend retries for a few seconds before an agent hears of an outage.
    assert any("mailbox unavailable" in agent.output() for agent in fleet)
