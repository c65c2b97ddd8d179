"""The cost of one idle poll in store operations, against docs/benchmarks.md ("Cost of a poll").

An agent that holds nothing, once it has seen the mailbox (W: statuses in flight held by other
agents; H: the agents holding them; N: statuses it must read again, below):

    with take_over:     2 lists + H record reads + N status reads
    without take_over:  2 lists, and at the sweep (once per stale_after) W status reads
    either way:         + 1 write when its heartbeat is due (every stale_after / 4)

N counts statuses not seen before and those of a holder whose record moved since (another
process, stopping or stopped, lost, or silent for longer than its stale_after); 0 in a steady
fleet. Finished requests cost nothing once seen, however many there are.

Retention is off here: its run (once per ``every`` across the fleet) has a cost of its own,
measured by benchmarks/poll_history.py (docs/benchmarks.md, "Poll cost against history").
"""

from __future__ import annotations

import pytest

from fdcore.agent.settings import RetentionConfig
from fdcore.contract.layout import agent_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, State, Status
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet

HOLDERS = ("etl-02", "etl-03")
NO_RETENTION = RetentionConfig(enabled=False)


def beat(fleet: MemoryFleet, name: str, **fields: object) -> None:
    """``name``'s heartbeat at the fleet's time, as that agent writes it; ``fields`` (its
    instance, stale_after, stopping) stay as given until given again."""
    key = agent_key(name)
    kept = LOOKS.setdefault((id(fleet), name), {"instance": "first", "stale_after": 60.0})
    kept.update(fields)
    record = AgentRecord(name=name, updated_at=fleet.clock.now(), **kept)  # type: ignore[arg-type]
    blob = fleet.storage.read(key)
    if blob is None:
        fleet.mailbox.create(key, record)
    else:
        fleet.mailbox.replace(key, record, blob.etag)


LOOKS: dict[tuple[int, str], dict[str, object]] = {}


def fill(fleet: MemoryFleet, finished: int, in_flight: int, stale_after: float = 60.0) -> None:
    """``finished`` succeeded requests and ``in_flight`` running ones, held by live HOLDERS."""
    mailbox = fleet.mailbox
    for name in HOLDERS:
        beat(fleet, name, stale_after=stale_after)
    for n in range(finished + in_flight):
        request_id = f"r{n:05d}"
        submit(mailbox, ["sales"], request_id=request_id, now=START)
        holder = HOLDERS[n % len(HOLDERS)]
        state = State.SUCCEEDED if n < finished else State.RUNNING
        status = Status(
            request=request_id,
            state=state,
            agent=holder,
            updated_at=START,
            attempt=1,
            attempts=[Attempt(number=1, agent=holder, started_at=START)],
        )
        mailbox.create(status_key(request_id), status)


def idle_poll(fleet: MemoryFleet, seconds: float) -> int:
    """Advance the time, let the holders beat, poll etl-01: the store operations of its poll."""
    fleet.clock.advance(seconds)
    for name in HOLDERS:
        beat(fleet, name)
    before = fleet.storage.operations
    fleet.agents["etl-01"].poll()
    assert fleet.agents["etl-01"].idle
    return fleet.storage.operations - before


@pytest.mark.parametrize("finished", [0, 500])
def test_an_idle_polls_cost_follows_the_agents_not_the_work_or_history(finished: int) -> None:
    fleet = MemoryFleet.fresh()
    fill(fleet, finished, in_flight=6)
    fleet.agent(
        "etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0, stale_after=60.0
    )
    fleet.agents["etl-01"].poll()  # the first poll reads every status once
    # Polls 5 s apart; the heartbeat (stale_after / 4 = 15 s) is due at every third.
    costs = [idle_poll(fleet, 5.0) for _ in range(6)]
    h = len(HOLDERS)
    assert costs == [2 + h, 2 + h, 2 + h + 1, 2 + h, 2 + h, 2 + h + 1]


def test_a_holder_whose_record_moved_has_its_statuses_read_again() -> None:
    fleet = MemoryFleet.fresh()
    fill(fleet, 0, in_flight=6)  # 3 statuses each
    fleet.agent(
        "etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0, stale_after=600.0
    )
    fleet.agents["etl-01"].poll()
    assert idle_poll(fleet, 5.0) == 2 + 2
    fleet.clock.advance(5.0)
    beat(fleet, "etl-02", instance="second")  # etl-02 restarted: its statuses may have moved
    before = fleet.storage.operations
    fleet.agents["etl-01"].poll()
    assert fleet.storage.operations - before == 2 + 2 + 3
    assert idle_poll(fleet, 5.0) == 2 + 2  # ... and trusted again once read
    fleet.clock.advance(5.0)
    beat(fleet, "etl-03", stopping=True)  # etl-03 stops: it may hand its requests back
    before = fleet.storage.operations
    fleet.agents["etl-01"].poll()
    assert fleet.storage.operations - before == 2 + 2 + 3


def test_a_handed_back_request_is_found_at_the_next_sweep() -> None:
    fleet = MemoryFleet.fresh()
    fill(fleet, 0, in_flight=2)
    agent = fleet.agent(
        "etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0, stale_after=60.0
    )
    agent.poll()
    idle_poll(fleet, 5.0)
    # etl-02 stops: its record says so first, then it hands its request back.
    fleet.clock.advance(5.0)
    beat(fleet, "etl-02", stopping=True)
    found = fleet.mailbox.status("r00000")
    assert found is not None
    handed_back = found.value
    handed_back.agent, handed_back.state = None, State.ACCEPTED
    fleet.mailbox.replace(status_key("r00000"), handed_back, found.etag)
    agent.poll()
    assert list(agent.held) == ["r00000"]


def test_without_take_over_the_sweep_reads_the_statuses_once_per_stale_after() -> None:
    fleet = MemoryFleet.fresh()
    fill(fleet, 300, in_flight=4)
    fleet.agent("etl-01", retention=NO_RETENTION, poll_seconds=5.0, stale_after=20.0)
    fleet.agents["etl-01"].poll()
    # stale_after / 4 = 5 s: a heartbeat every poll. The sweep every 20 s reads the statuses in
    # flight (W = 4) and no record: it takes nothing over, and its sweeps are too far apart to
    # tell a status it read is still what it says.
    costs = [idle_poll(fleet, 5.0) for _ in range(4)]
    assert costs == [2 + 1, 2 + 1, 2 + 1, 2 + 1 + 4]
