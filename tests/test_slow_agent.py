"""An agent that is slow, not lost: whatever it takes, it takes on a record written recently
enough that no other agent can judge it lost before its next one (docs/takeover.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fdcore.agent.core import Agent
from fdcore.builtin.memory import MemoryStorage
from fdcore.clock import ManualClock
from fdcore.contract.layout import agent_key
from fdcore.contract.models import AgentRecord
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet

# At the defaults (stale_after 60) the record is written every 15 s.


class Starved:
    """The store as an agent on a host starved of CPU meets it: every listing ends ``seconds``
    of the agent's clock later."""

    def __init__(self, inner: MemoryStorage, clock: ManualClock, seconds: float) -> None:
        self.inner = inner
        self.clock = clock
        self.seconds = seconds

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if not name.startswith("list") or not callable(found):
            return found

        def slow(*args: Any, **kwargs: Any) -> Any:
            listed = found(*args, **kwargs)
            self.clock.advance(self.seconds)
            return listed

        return slow


def record_of(fleet: MemoryFleet, agent: Agent) -> AgentRecord:
    found = fleet.mailbox.read(AgentRecord, agent_key(agent.name))
    assert found is not None
    return found.value


def claimed_by(fleet: MemoryFleet, request_id: str) -> str | None:
    found = fleet.mailbox.status(request_id)
    return found.value.agent if found is not None else None


def test_a_claim_at_the_end_of_a_slow_poll_waits_for_a_fresh_record(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    fleet.wrap_storage(lambda inner: Starved(inner, fleet.clock, 10))
    agent = fleet.agent("etl-01")
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    agent.poll()  # the record at its start, then listings that take 10 s each
    assert claimed_by(fleet, "r1") == "etl-01"
    # Written again before the claim: the one of the poll's start was 15 s old by then.
    assert record_of(fleet, agent).updated_at >= START + timedelta(seconds=15)


def test_a_reaction_claims_and_starts_tables_on_a_fresh_record(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01")
    agent.poll()
    assert record_of(fleet, agent).updated_at == START
    fleet.clock.advance(20)  # past the heartbeat's interval: the next poll would write it
    submit(fleet.mailbox, ["sales"], request_id="r1", now=fleet.clock.now())
    agent.react(new_work=True)
    assert claimed_by(fleet, "r1") == "etl-01"
    assert [run.job.request for run in fleet.runs] == ["r1"]
    assert record_of(fleet, agent).updated_at == START + timedelta(seconds=20)
    # Not due: nothing more is written for the next one.
    fleet.clock.advance(5)
    submit(fleet.mailbox, ["customers"], request_id="r2", now=fleet.clock.now())
    fleet.finish_runs("r1")
    agent.react(new_work=True)
    assert [run.job.request for run in fleet.runs] == ["r1", "r2"]
    assert record_of(fleet, agent).updated_at == START + timedelta(seconds=20)
