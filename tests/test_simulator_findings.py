"""Agent bugs the simulator found, each reduced to a minimal test on real agents.

Each test drives real :class:`fdcore.agent.Agent` objects by hand (manual clocks, one in-memory
store, manual table runs), so it names one mechanism. The simulator seed that first showed it is
in docs/simulator.md ("Findings"). A fixed finding's test keeps it fixed; an open one's test is
marked ``xfail(strict=True)``, so fixing it turns the suite red until the mark is removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from fdcore.abc import Blob
from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.models import AgentRecord, Outcome, State
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.submit import submit
from fdcore.settings.agent_toml import ScheduleConfig
from fdcore.testing.memory_fleet import START, MemoryFleet

pytestmark = pytest.mark.processes


class LosesAnswers:
    """A store that fails chosen operations once: before applying, or after (answer lost)."""

    def __init__(self, inner: MemoryStorage) -> None:
        self.inner = inner
        self.url = inner.url
        self.planned: list[list[object]] = []  # [operation, key prefix, applied, skip]

    def fail_next(self, operation: str, prefix: str, *, applied: bool, skip: int = 0) -> None:
        """Fail the matching operation after ``skip`` matching ones went through."""
        self.planned.append([operation, prefix, applied, skip])

    def _failing(self, operation: str, key: str) -> bool | None:
        for plan in self.planned:
            if plan[0] == operation and key.startswith(str(plan[1])):
                if plan[3]:
                    plan[3] = int(str(plan[3])) - 1
                    return None
                self.planned.remove(plan)
                return bool(plan[2])
        return None

    def _do(self, operation: str, key: str, *args: object) -> object:
        applied = self._failing(operation, key)
        if applied is False:
            raise StorageUnavailable(key, f"{operation} failed (test)")
        result = getattr(self.inner, operation)(key, *args)
        if applied:
            raise StorageUnavailable(key, f"{operation} applied but its answer was lost (test)")
        return result

    def read(self, key: str) -> Blob | None:
        return self.inner.read(key)

    def create(self, key: str, data: bytes) -> str:
        return str(self._do("create", key, data))

    def replace(self, key: str, data: bytes, etag: str) -> str:
        return str(self._do("replace", key, data, etag))

    def delete(self, key: str, etag: str | None = None) -> None:
        self._do("delete", key, etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list(prefix)

    def close(self) -> None:
        pass


def test_a_live_agents_table_lease_is_not_taken_by_an_agent_whose_clock_runs_ahead() -> None:
    # Clocks 60 s apart: what DESIGN's one-minute grace is there to cover.
    machines = MemoryFleet.fresh()
    behind = machines.agent("behind", skew=-30, claim="when_free")
    ahead = machines.agent("ahead", skew=+30, claim="when_free")
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    behind.poll()  # claims r1, leases sales, starts the run
    submit(machines.mailbox, ["sales"], request_id="r2", now=START)
    for _ in range(12):  # one minute: behind polls (and renews) every 5 s throughout
        machines.clock.advance(5)
        behind.poll()
        ahead.poll()
    assert machines.runs_of("sales") == ["behind#1"]


def test_a_lost_answer_on_a_status_update_does_not_cost_an_attempt() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    agent = machines.agent("etl-01")
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    # The claim lands; the "running" update lands too, but its answer is lost.
    store.fail_next("replace", "status/r1", applied=True)
    agent.poll()
    for _ in range(20):  # past stale_after, when its sweep would pick the request up again
        machines.clock.advance(5)
        machines.finish_runs()
        agent.poll()
    status = machines.mailbox.status("r1")
    assert status is not None and status.value.state is State.SUCCEEDED
    assert [(a.number, a.outcome) for a in status.value.attempts] == [(1, Outcome.SUCCEEDED)]


def test_a_pause_shorter_than_stale_after_does_not_cost_an_attempt() -> None:
    machines = MemoryFleet.fresh()
    paused = machines.agent("etl-01", claim="when_free")
    other = machines.agent("etl-02", claim="when_free")
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    paused.poll()  # claims r1, leases sales for 60 s (lease_seconds = stale_after)
    submit(machines.mailbox, ["sales"], request_id="r2", now=START)
    other.poll()  # claims r2, waits for the lease on sales
    for second in range(5, 125, 5):
        machines.clock.advance(5)
        if not 35 < second < 95:  # silent for 55 s: under stale_after, but the lease lapses
            paused.poll()
        other.poll()
        machines.finish_runs("r2")  # r1's table is a long one
    status = machines.mailbox.status("r1")
    assert status is not None
    assert [a.outcome for a in status.value.attempts if a.outcome is Outcome.LOST] == []


def test_a_store_error_after_a_table_is_done_does_not_run_the_next_table_under_its_lease() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    agent = machines.agent("etl-01")
    submit(machines.mailbox, ["sales", "customers"], request_id="r1", now=START)
    agent.poll()
    machines.finish_runs()
    # sales is recorded done in the status; then its run-log write fails (so no lease release).
    store.fail_next("create", "runs/r1/", applied=False)
    agent.poll()
    machines.clock.advance(5)
    agent.poll()
    customers = [run.job for run in machines.runs if run.job.table == "customers"]
    assert len(customers) == 1
    lease = MailboxLeases(machines.storage).current("customers")
    assert lease is not None, f"customers ran under token {customers[0].fencing_token} unleased"
    assert (lease.holder, lease.generation) == ("etl-01", customers[0].fencing_token)
    sales = MailboxLeases(machines.storage).current("sales")
    assert sales is not None and sales.released


def test_a_lost_answer_on_a_table_done_update_does_not_run_the_table_again() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    agent = machines.agent("etl-01")
    submit(machines.mailbox, ["sales", "customers"], request_id="r1", now=START)
    agent.poll()
    machines.finish_runs()
    # The status update recording sales done lands, but its answer is lost.
    store.fail_next("replace", "status/r1", applied=True)
    for _ in range(5):
        machines.clock.advance(5)
        agent.poll()
        machines.finish_runs()
    status = machines.mailbox.status("r1")
    assert status is not None and status.value.state is State.SUCCEEDED
    assert machines.runs_of("sales") == ["etl-01#1"]
    assert status.value.tables_done == ["sales", "customers"]


def test_a_resumed_agent_takes_over_a_request_it_lost_while_paused_once_its_taker_dies() -> None:
    machines = MemoryFleet.fresh()
    resumed = machines.agent("etl-01", claim="always", take_over=True)
    taker = machines.agent("etl-02", claim="always", take_over=True)
    submit(machines.mailbox, ["orders"], request_id="r0", now=START)
    taker.poll()  # its one worker runs r0 (a long table) from now on
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    resumed.poll()  # claims r1 and starts sales; then it is paused
    for _ in range(28):  # 140 s: the taker judges etl-01 lost and takes r1 (no worker free)
        machines.clock.advance(5)
        taker.poll()
    status = machines.mailbox.status("r1")
    assert status is not None and (status.value.agent, status.value.attempt) == ("etl-02", 2)
    for _ in range(32):  # the taker dies; etl-01 resumes, its sales run still going
        machines.clock.advance(5)
        resumed.poll()
    # etl-02 has been silent for 160 s (> stale_after + grace): r1 is due for takeover.
    status = machines.mailbox.status("r1")
    assert status is not None
    assert (status.value.agent, status.value.attempt) == ("etl-01", 3)


def test_a_restarted_agent_resumes_its_own_requests_before_claiming_newer_ones() -> None:
    machines = MemoryFleet.fresh()
    first = machines.agent("etl-01", claim="when_free")
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    first.poll()  # claims r1 and starts it; then the process dies
    machines.clock.advance(30)
    submit(machines.mailbox, ["orders"], request_id="r2", now=START + timedelta(seconds=30))
    restarted = machines.agent("etl-01", claim="when_free")
    restarted.poll()
    assert sorted(restarted.held) == ["r1"]


def test_a_lost_agents_request_is_taken_over_before_newer_requests_are_claimed() -> None:
    machines = MemoryFleet.fresh()
    lost = machines.agent("etl-01", claim="when_free")
    taker = machines.agent("etl-02", claim="when_free", take_over=True)
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    lost.poll()  # claims r1; then it goes silent
    for _ in range(25):  # past stale_after (60) + grace (60)
        machines.clock.advance(5)
        taker.poll()
    submit(machines.mailbox, ["orders"], request_id="r2", now=START + timedelta(seconds=125))
    machines.clock.advance(5)
    taker.poll()
    assert sorted(taker.held) == ["r1"]


def test_a_store_error_on_a_slots_create_is_retried_within_the_slots_window() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    hourly = ScheduleConfig("refresh", ("sales",), "every", "1h", shared=True)
    agent = machines.agent("etl-01", schedules=(hourly,))
    slot = int(START.timestamp()) // 3600  # START is 02:00: this slot is due, until 03:00
    store.fail_next("create", "requests/sched-refresh-", applied=False)
    agent.poll()  # the slot's create fails before it reaches the store
    machines.clock.advance(5)
    agent.poll()  # still inside the slot's window, with the store back
    assert machines.storage.read(f"requests/sched-refresh-{slot}.json") is not None


def test_a_resumed_agent_takes_over_a_waiting_request_whose_taker_died() -> None:
    machines = MemoryFleet.fresh()
    resumed = machines.agent("etl-01", claim="always", take_over=True)  # one worker
    taker = machines.agent("etl-02", claim="when_free", take_over=True)
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    submit(machines.mailbox, ["orders"], request_id="a2", now=START + timedelta(seconds=1))
    machines.clock.advance(1)
    resumed.poll()  # claims both, runs r1; a2 waits for its one worker; then it is paused
    for _ in range(26):  # 130 s: the taker judges etl-01 lost and takes a2 (its one worker)
        machines.clock.advance(5)
        taker.poll()
    status = machines.mailbox.status("a2")
    assert status is not None and (status.value.agent, status.value.attempt) == ("etl-02", 2)
    for _ in range(30):  # the taker dies; etl-01 resumes, r1 still running, a2 still held
        machines.clock.advance(5)
        resumed.poll()
    # etl-02 has been silent for 150 s (> stale_after + grace): a2 is due for takeover.
    status = machines.mailbox.status("a2")
    assert status is not None
    assert (status.value.agent, status.value.attempt) == ("etl-01", 3)


def test_a_lost_answer_on_the_record_write_does_not_leave_the_record_stale() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    agent = machines.agent("etl-01")
    agent.poll()  # creates agents/etl-01.json
    machines.clock.advance(5)
    store.fail_next("replace", "agents/etl-01", applied=True)
    agent.poll()  # its record's replace lands, but the answer is lost
    machines.clock.advance(100)  # past stale_after: others may judge it lost until it writes again
    agent.poll()  # the store answers again: it rewrites its record
    record = machines.mailbox.read(AgentRecord, "agents/etl-01.json")
    assert record is not None
    assert record.value.updated_at == machines.clock.now()


def test_a_run_record_whose_write_failed_after_the_final_status_is_written_later() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    agent = machines.agent("etl-01")
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    agent.poll()
    machines.finish_runs()
    # The finish lands; the run record's create fails: the request is final, no longer held.
    store.fail_next("create", "runs/r1/", applied=False)
    agent.poll()
    assert machines.mailbox.runs("r1") == []
    machines.clock.advance(5)
    agent.poll()
    (record,) = machines.mailbox.runs("r1")
    assert (record.table, record.outcome) == ("sales", Outcome.SUCCEEDED)


def test_a_lost_answer_on_the_finish_still_writes_the_run_record_after_the_lease_moved_on() -> None:
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    first = machines.agent("etl-01", claim="when_free", concurrency=1)
    other = machines.agent("etl-02", claim="when_free", concurrency=1)
    submit(machines.mailbox, ["sales"], request_id="r1", now=START)
    first.poll()
    submit(machines.mailbox, ["sales"], request_id="r2", now=START)
    other.poll()  # claims r2, waits for sales
    machines.finish_runs("r1")
    # r1's finish lands but its answer is lost; the final status frees sales, r2 takes it.
    store.fail_next("replace", "status/r1", applied=True)
    first.react()  # the table's end, handled between polls: the error ends the reaction
    other.poll()
    assert machines.runs_of("sales") == ["etl-01#1", "etl-02#1"]
    machines.clock.advance(5)
    first.poll()  # finds the lease moved on, and its own finish in the status
    (record,) = machines.mailbox.runs("r1")
    assert (record.agent, record.outcome, record.generation) == ("etl-01", Outcome.SUCCEEDED, 1)


def test_a_table_done_whose_answer_was_lost_before_a_takeover_still_gets_its_run_record() -> None:
    # Seen in CI (Azurite stopped for 7 s, stale_after 2 s): "a done" landed, its answer lost;
    # the agent was taken over before it could retry; the retry found another agent's status,
    # dropped the request, and the run of a, which the status counts, had no record.
    machines = MemoryFleet.fresh()
    store = machines.wrap_storage(LosesAnswers)
    first = machines.agent("etl-01", take_over=True)
    other = machines.agent("etl-02", take_over=True)
    submit(machines.mailbox, ["a", "b"], request_id="r1", now=START)
    first.poll()
    machines.finish_runs()
    store.fail_next("replace", "status/r1", applied=True)
    first.react()  # "a done" lands; its answer is lost
    for _ in range(30):  # etl-01 silent past stale_after + grace: etl-02 takes r1 over
        machines.clock.advance(5)
        other.poll()
    status = machines.mailbox.status("r1")
    assert status is not None and (status.value.agent, status.value.attempt) == ("etl-02", 2)
    assert status.value.tables_done == ["a"]
    first.poll()  # its retry finds r1 taken over: it lets go, and writes the record it owes
    assert "r1" not in first.held
    machines.finish_runs()
    other.poll()
    runs = sorted((r.table, r.agent, r.attempt) for r in machines.mailbox.runs("r1"))
    assert runs == [("a", "etl-01", 1), ("b", "etl-02", 2)]
    assert machines.runs_of("a") == ["etl-01#1"]
