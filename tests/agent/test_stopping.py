"""The agent as its parts make it: stopping hands work back, abandoning cancels it first."""

from __future__ import annotations

from agent_parts_helpers import INSTANCE, Environment

from fdcore.abc import TableResult
from fdcore.agent.core import Agent
from fdcore.contract.models import AgentRecord, Outcome, State


def agent(env: Environment) -> Agent:
    config = env.config(claim="always", concurrency=1)
    return Agent(config, env.mailbox, env.components(config), env.clock, instance=INSTANCE)


def test_stopping_hands_back_waiting_requests_at_once_and_running_ones_after_their_table(
    env: Environment,
) -> None:
    env.submit("r1", "sales", "customers")
    env.submit("r2", "orders")
    etl = agent(env)
    etl.poll()  # r1's sales runs; r2 waits for the one worker
    etl.stop()
    env.advance(5)
    etl.poll()
    assert env.mailbox.status("r2") is None  # nothing done: the claim is deleted
    assert sorted(etl.held) == ["r1"] and not env.runs[0].cancelled
    env.runs[0].result = TableResult(True)
    env.advance(5)
    etl.poll()
    status = env.status("r1")
    assert (status.state, status.agent, status.tables_done) == (State.ACCEPTED, None, ["sales"])
    assert [run.job.table for run in env.runs] == ["sales"]  # customers never started
    assert etl.idle
    etl.close()
    record = env.mailbox.read(AgentRecord, "agents/etl-01.json")
    assert record is not None and record.value.stopped_at == env.clock.now()


def test_abandoning_cancels_running_tables_and_hands_their_requests_back(
    env: Environment,
) -> None:
    env.submit("r1", "sales", "customers")
    etl = agent(env)
    etl.poll()
    env.runs[0].result = TableResult(True)
    env.advance(5)
    etl.poll()  # sales recorded, customers runs
    etl.stop()
    etl.abandon()  # the shutdown grace ran out
    assert env.runs[1].cancelled and etl.idle
    status = env.status("r1")
    assert (status.state, status.agent, status.tables_done) == (State.ACCEPTED, None, ["sales"])
    assert [a.outcome for a in status.attempts] == [Outcome.STOPPED]
    lease = env.leases.current("customers")
    assert lease is not None and lease.released
