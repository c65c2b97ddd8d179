"""The cost of one idle poll in store operations, against docs/benchmarks.md ("Cost of a poll").

    with take_over:     2 lists + W status reads + H record reads (+ 1 write when the heartbeat
                        is due, every stale_after / 4)
    without take_over:  2 lists (+ W status reads once per stale_after, the sweep)

W: requests in flight held by other agents; H: the agents holding them. Finished requests cost
nothing once seen (each status is read once per agent process), however many there are.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from fdcore.contract.layout import agent_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, State, Status
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet

HOLDERS = ("etl-02", "etl-03")


def fill(fleet: MemoryFleet, finished: int, in_flight: int) -> None:
    """``finished`` succeeded requests and ``in_flight`` running ones, held by live HOLDERS."""
    mailbox = fleet.mailbox
    for name in HOLDERS:
        record = AgentRecord(name=name, updated_at=START + timedelta(days=1), stale_after=600.0)
        mailbox.create(agent_key(name), record)
    for n in range(finished + in_flight):
        request_id = f"r{n:05d}"
        submit(mailbox, ["sales"], request_id=request_id, now=START)
        holder = HOLDERS[n % len(HOLDERS)]
        state = State.SUCCEEDED if n < finished else State.RUNNING
        attempts = [Attempt(number=1, agent=holder, started_at=START)]
        status = Status(
            request=request_id,
            state=state,
            agent=holder,
            updated_at=START,
            attempt=1,
            attempts=attempts,
        )
        mailbox.create(status_key(request_id), status)


def idle_poll_operations(fleet: MemoryFleet, seconds: float) -> int:
    agent = fleet.agents["etl-01"]
    before = fleet.storage.operations
    fleet.clock.advance(seconds)
    agent.poll()
    return fleet.storage.operations - before


def expected(in_flight: int, holders: int, heartbeat: bool, sweep: bool) -> int:
    """docs/benchmarks.md, "Cost of a poll", for an agent that holds nothing."""
    return 2 + (in_flight + holders if sweep else 0) + (1 if heartbeat else 0)


@pytest.mark.parametrize("finished", [0, 500])
def test_an_idle_polls_cost_follows_the_work_in_flight_not_history(finished: int) -> None:
    fleet = MemoryFleet.fresh()
    in_flight = 6
    fill(fleet, finished, in_flight)
    agent = fleet.agent("etl-01", take_over=True, poll_seconds=5.0, stale_after=60.0)
    agent.poll()  # the first poll reads every status once (finished ones never again)
    assert agent.idle
    # Polls 5 s apart; the heartbeat (stale_after / 4 = 15 s) is due at every third.
    costs = [idle_poll_operations(fleet, 5.0) for _ in range(6)]
    beats = [False, False, True, False, False, True]
    assert costs == [expected(in_flight, len(HOLDERS), b, sweep=True) for b in beats]


def test_without_take_over_the_sweep_reads_statuses_once_per_stale_after() -> None:
    fleet = MemoryFleet.fresh()
    in_flight = 4
    fill(fleet, 300, in_flight)
    agent = fleet.agent("etl-01", poll_seconds=5.0, stale_after=20.0)
    agent.poll()
    # stale_after / 4 = 5 s: a heartbeat every poll; the sweep every 20 s (at the 4th poll).
    costs = [idle_poll_operations(fleet, 5.0) for _ in range(4)]
    assert costs == [
        expected(in_flight, 0, heartbeat=True, sweep=sweep) for sweep in (False,) * 3 + (True,)
    ]
