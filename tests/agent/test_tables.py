"""A held request's tables: lease, ownership check, run, renewal, record; lost leases re-run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from agent_parts_helpers import Environment, attempt, held_by

from fdcore.abc import Blob, TableJob, TableResult
from fdcore.agent.skew import MEASUREMENT_ERROR, ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.tables import Tables
from fdcore.agent.work import Holdings, Work
from fdcore.builtin.memory import MemoryStorage
from fdcore.clock import ManualClock
from fdcore.contract.models import Outcome, State
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.archive import archive_files, find_request_files
from fdcore.testing.memory_fleet import START

pytestmark = pytest.mark.processes

# Defaults: lease_seconds = stale_after = 60, grace 60, poll_seconds 5.
DAY = "2026/01/02"  # an archive day folder


def started(env: Environment, *tables: str) -> tuple[Tables, StatusChanges, Holdings, Work]:
    """etl-01 holds r1 (``tables``, default sales) and has started its first table."""
    env.submit("r1", *(tables or ("sales",)))
    tables_part, changes, holdings = env.tables(env.config())
    work = env.claimed(changes, holdings, "r1")
    tables_part.next_table(work, env.clock.now())
    return tables_part, changes, holdings, work


def finish(env: Environment, succeeded: bool = True, message: str = "") -> None:
    env.runs[-1].result = TableResult(succeeded, message)


@contextlib.contextmanager
def answers_lost(env: Environment) -> Iterator[None]:
    """Within the block, each status or lease replace lands, then raises as a lost answer."""
    replace = env.storage.replace

    def answer_lost(key: str, data: bytes, etag: str) -> str:
        replace(key, data, etag)
        raise StorageUnavailable(key, "replace landed, answer lost (test)")

    env.storage.replace = answer_lost  # type: ignore[method-assign]
    try:
        yield
    finally:
        env.storage.replace = replace  # type: ignore[method-assign]


def lease_of(env: Environment, table: str) -> tuple[str, int, bool]:
    lease = env.leases.current(table)
    assert lease is not None
    return lease.holder, lease.generation, lease.released


def test_each_table_runs_under_its_lease_and_is_recorded_before_the_next(
    env: Environment,
) -> None:
    tables, _, holdings, work = started(env, "sales", "customers")
    assert env.status("r1").state is State.RUNNING
    assert env.runs[0].job == TableJob("r1", "sales", 1, 1, "etl-01", env.storage.url)
    assert lease_of(env, "sales") == ("etl-01", 1, False)
    assert not tables.poll_run(work, START)  # still running
    env.advance(10)
    finish(env)
    assert tables.poll_run(work, env.clock.now())
    assert env.status("r1").tables_done == ["sales"]
    assert lease_of(env, "sales") == ("etl-01", 1, True)
    [record] = env.mailbox.runs("r1")
    assert (record.table, record.attempt, record.generation, record.outcome) == (
        "sales",
        1,
        1,
        Outcome.SUCCEEDED,
    )
    assert (record.started_at, record.ended_at) == (START, START + timedelta(seconds=10))
    tables.next_table(work, env.clock.now())
    assert [run.job.table for run in env.runs] == ["sales", "customers"]
    finish(env)
    # The last table is recorded by the finish itself: one status write, and no release (the
    # final status frees the lease: another agent's request takes it at once).
    assert not tables.poll_run(work, env.clock.now())  # nothing left to move: it succeeded
    final = env.status("r1")
    assert (final.state, final.tables_done) == (State.SUCCEEDED, ["sales", "customers"])
    assert holdings.work == {}
    assert lease_of(env, "customers") == ("etl-01", 1, False)
    taken = env.leases.acquire("customers", "etl-02", "r9", 1, 60, env.clock.now())
    assert taken is not None and taken.lease.generation == 2


def test_a_table_waits_while_another_holder_has_its_lease(env: Environment) -> None:
    env.leases.acquire("sales", "etl-02", "r0", 1, 60, START)
    tables, _, _, work = started(env)
    assert env.runs == [] and work.lease is None
    env.advance(60 + 60)  # the other lease has run out, and the grace after it
    tables.next_table(work, env.clock.now())
    assert [run.job.fencing_token for run in env.runs] == [2]


class StampedStore(MemoryStorage):
    """Stands in for a store that reports its time (:class:`fdcore.abc.StoreClock`)."""

    time = START

    def last_write_time(self) -> datetime:
        return self.time


def test_a_clock_far_off_the_stores_takes_no_live_holders_lease_however_old_it_looks(
    env: Environment,
) -> None:
    """Issue 24, item 2: by this agent's clock, 200 s ahead, the other lease ran out long ago."""
    held = env.leases.acquire("sales", "etl-02", "r0", 1, 60, START)
    tables, _, _, work = started(env)
    skew = ClockSkew("etl-01", 60, env.clock, StampedStore.fresh("stamped"))
    tables.skew = skew
    env.advance(200)
    tables.next_table(work, env.clock.now())  # not measured yet: no judging by this clock
    assert env.runs == [] and work.lease is None
    skew.measure()
    assert skew.seconds == 200 and skew.refuses_takeover
    tables.next_table(work, env.clock.now())
    assert env.runs == [] and work.lease is None
    assert held is not None
    env.leases.release(held, START + timedelta(seconds=10))  # its holder gives it up
    tables.next_table(work, env.clock.now())
    assert [run.job.fencing_token for run in env.runs] == [2]


def test_a_clock_measured_far_behind_writes_its_leases_in_the_stores_time(
    env: Environment,
) -> None:
    """Issue 24, item 2: others judge this agent's lease by their clocks; written by its own,
    an hour behind, it would look an hour run out to them as soon as it was taken."""
    env.submit("r1", "sales")
    tables, changes, holdings = env.tables(env.config())
    work = env.claimed(changes, holdings, "r1")
    store = StampedStore.fresh("stamped")
    store.time = env.clock.now() + timedelta(seconds=3600)  # the store's clock, an hour later
    skew = ClockSkew("etl-01", 60, env.clock, store)
    tables.skew = skew
    tables.next_table(work, env.clock.now())  # not measured yet: in which time to write?
    assert env.runs == [] and work.lease is None
    assert skew.measure()  # the times it writes moved to the store's
    # The store's, never behind it: a measurement may be up to the error above the true skew.
    store_now = store.time + timedelta(seconds=MEASUREMENT_ERROR)
    assert (skew.seconds, skew.store_time(env.clock.now())) == (-3600, store_now)
    tables.next_table(work, env.clock.now())
    assert [run.job.fencing_token for run in env.runs] == [1]
    lease = env.leases.current("sales")
    assert lease is not None and lease.expires_at == store_now + timedelta(seconds=60)
    env.advance(31)  # half the lease gone, by the store's time as by its clock: renewed
    assert not tables.poll_run(work, env.clock.now())
    lease = env.leases.current("sales")
    assert lease is not None and lease.expires_at == store_now + timedelta(seconds=91)


def test_a_running_tables_lease_is_renewed_once_half_of_it_is_gone(env: Environment) -> None:
    tables, _, _, work = started(env)
    env.advance(29)
    tables.poll_run(work, env.clock.now())
    assert work.lease is not None and work.lease.lease.expires_at == START + timedelta(seconds=60)
    env.advance(2)
    tables.poll_run(work, env.clock.now())
    assert work.lease is not None
    assert work.lease.lease.expires_at == START + timedelta(seconds=31 + 60)
    assert env.leases.current("sales") == work.lease.lease


def test_a_renewal_that_finds_the_request_taken_over_stops_the_table(env: Environment) -> None:
    tables, _, holdings, work = started(env)
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    env.advance(31)
    assert not tables.poll_run(work, env.clock.now())
    assert env.runs[0].cancelled and holdings.work == {}
    assert lease_of(env, "sales") == ("etl-01", 1, True)


def test_a_lease_taken_while_the_agent_was_away_costs_a_rerun_not_an_attempt(
    env: Environment,
) -> None:
    tables, _, holdings, work = started(env)
    env.advance(130)  # paused past the lease and its grace: another request's agent takes it
    taker = env.leases.acquire("sales", "etl-02", "r0", 1, 60, env.clock.now(), grace=60)
    assert taker is not None
    assert not tables.poll_run(work, env.clock.now())  # the renewal finds it taken
    assert env.runs[0].cancelled and work.lease is None and "r1" in holdings.work
    env.leases.release(taker, env.clock.now())
    tables.next_table(work, env.clock.now())
    assert [(run.job.attempt, run.job.fencing_token) for run in env.runs] == [(1, 1), (1, 3)]
    assert [a.outcome for a in env.status("r1").attempts] == [Outcome.RUNNING]


def test_a_lease_not_renewed_for_an_outage_stops_the_table_before_it_runs_out(
    env: Environment,
) -> None:
    tables, _, holdings, work = started(env)
    env.storage.down = True
    env.advance(31)  # due for renewal, which fails: the lease still has 29 s
    assert not tables.poll_run(work, env.clock.now())
    assert not env.runs[0].cancelled and work.lease is not None
    env.advance(25)  # 4 s left: less than a poll
    assert not tables.poll_run(work, env.clock.now())
    assert env.runs[0].cancelled and work.lease is None and "r1" in holdings.work


def test_a_failed_table_fails_the_request_and_records_the_failed_run(env: Environment) -> None:
    tables, _, holdings, work = started(env, "sales", "customers")
    finish(env, succeeded=False, message="boom")
    assert not tables.poll_run(work, env.clock.now())  # nothing more to move
    status = env.status("r1")
    assert (status.state, status.message) == (State.FAILED, "table sales failed: boom")
    assert [(r.outcome, r.message) for r in env.mailbox.runs("r1")] == [(Outcome.FAILED, "boom")]
    # No release written: the failed (final) status frees the lease.
    assert lease_of(env, "sales") == ("etl-01", 1, False)
    assert env.leases.acquire("sales", "etl-02", "r9", 1, 60, env.clock.now()) is not None
    assert holdings.work == {}


def test_a_runner_that_cannot_start_fails_the_table_not_the_agent(env: Environment) -> None:
    env.submit("r1", "sales")
    tables, changes, holdings = env.tables(env.config())
    work = env.claimed(changes, holdings, "r1")

    def cannot_start(job: TableJob) -> None:
        raise OSError("no such command")

    tables.start_table = cannot_start  # type: ignore[assignment]
    tables.next_table(work, START)
    status = env.status("r1")
    assert (status.state, status.message) == (
        State.FAILED,
        "table sales failed: could not start: no such command",
    )


def test_a_finished_table_whose_lease_moved_on_is_not_recorded_and_runs_again(
    env: Environment,
) -> None:
    tables, _, holdings, work = started(env)
    env.advance(130)
    taker = env.leases.acquire("sales", "etl-02", "r0", 1, 60, env.clock.now(), grace=60)
    assert taker is not None
    env.leases.release(taker, env.clock.now())
    finish(env)
    assert tables.poll_run(work, env.clock.now())  # not recorded, and free to run it again
    assert env.status("r1").tables_done == [] and env.mailbox.runs("r1") == []
    assert work.result is None and "r1" in holdings.work
    tables.next_table(work, env.clock.now())
    assert [run.job.fencing_token for run in env.runs] == [1, 3]


def test_a_store_error_on_the_done_update_keeps_the_result_to_record_later(
    env: Environment,
) -> None:
    tables, _, _, work = started(env, "sales", "customers")
    finish(env)
    env.storage.down = True
    with pytest.raises(StorageUnavailable):  # the poll ends here; the agent retries next poll
        tables.poll_run(work, env.clock.now())
    assert work.result is not None
    env.storage.down = False
    assert tables.poll_run(work, env.clock.now())
    assert env.status("r1").tables_done == ["sales"]
    assert len(env.runs) == 1  # recorded, never run again


def test_the_last_tables_lease_left_held_is_released_before_the_next_table(
    env: Environment,
) -> None:
    tables, _, _, work = started(env, "sales", "customers")
    finish(env)
    env.storage.failing_creates = "runs/"
    with pytest.raises(StorageUnavailable):  # sales is done; its run record and release are not
        tables.poll_run(work, env.clock.now())
    env.storage.failing_creates = None
    assert env.status("r1").tables_done == ["sales"] and work.lease is not None
    # The next poll records the result kept in the work and releases the lease (finding 3b).
    # Whatever leaves such a lease held, the next table must never run under it (3a):
    work.result = None
    tables.next_table(work, env.clock.now())
    assert lease_of(env, "sales") == ("etl-01", 1, True)
    assert [(run.job.table, run.job.fencing_token) for run in env.runs][-1] == ("customers", 1)


def test_a_run_record_an_outage_kept_back_after_the_final_status_is_written_later(
    env: Environment,
) -> None:
    # Seen with Azurite stopped mid-run: the finish landed, the run record's write did not, and
    # the request, final and no longer held, was never looked at again: its last table had no
    # record of its run.
    tables, _, holdings, work = started(env, "sales")
    ended = env.clock.now()
    finish(env)
    env.storage.failing_creates = "runs/"
    with pytest.raises(StorageUnavailable):  # the poll reports the outage, as for any write
        tables.poll_run(work, ended)
    assert env.status("r1").state is State.SUCCEEDED and "r1" not in holdings.work
    env.advance(30)
    tables.write_unwritten()  # the next poll, store still down: kept, nothing raised
    assert env.mailbox.runs("r1") == [] and list(tables.unwritten) == ["runs/r1/001-sales.json"]
    env.storage.failing_creates = None
    tables.write_unwritten()
    (record,) = env.mailbox.runs("r1")
    assert (record.table, record.outcome, record.ended_at) == ("sales", Outcome.SUCCEEDED, ended)
    assert tables.unwritten == {}


@pytest.mark.parametrize("succeeded", [True, False])
def test_a_finish_whose_answer_was_lost_still_gets_its_run_record_once_the_lease_moved_on(
    env: Environment, succeeded: bool
) -> None:
    # Seen in the simulator: the final status landed, its answer was lost; the final status
    # freed the lease and another request's holder took it. The next poll found the lease
    # moved on, took the request for lost to it, and wrote no run record.
    tables, _, holdings, work = started(env, "sales")
    ended = env.clock.now()
    finish(env, succeeded, "" if succeeded else "bad row")
    with answers_lost(env), pytest.raises(StorageUnavailable):
        tables.poll_run(work, ended)
    assert env.status("r1").state is (State.SUCCEEDED if succeeded else State.FAILED)
    env.advance(10)
    assert env.leases.acquire("sales", "etl-02", "r9", 1, 60, env.clock.now()) is not None
    assert not tables.poll_run(work, env.clock.now())  # final: no longer held
    assert "r1" not in holdings.work and "r1" in holdings.final
    (record,) = env.mailbox.runs("r1")
    outcome = Outcome.SUCCEEDED if succeeded else Outcome.FAILED
    assert (record.outcome, record.generation, record.ended_at) == (outcome, 1, ended)
    assert lease_of(env, "sales") == ("etl-02", 2, False)  # the next holder's, untouched


def test_a_table_recorded_done_by_a_write_whose_answer_was_lost_is_not_run_again(
    env: Environment,
) -> None:
    env.submit("r1", "sales", "customers")
    tables, changes, holdings = env.tables(env.config())
    work = env.claimed(changes, holdings, "r1")
    changes.start(work, START)
    # "sales done" landed but its answer was lost: the agent still thinks sales is next.
    landed = held_by("r1", "etl-01", *work.status.attempts, state=State.RUNNING)
    landed.tables_done = ["sales"]
    env.write_status(landed)
    tables.next_table(work, START)
    assert env.runs == []
    assert lease_of(env, "sales") == ("etl-01", 1, True)
    tables.next_table(work, START)
    assert [run.job.table for run in env.runs] == ["customers"]


class SlowStore(ManualClock):
    """A clock that moves on by ``step`` each time it is read: every store call is that slow."""

    def __init__(self, start: datetime, step: float) -> None:
        super().__init__(start)
        self.step = timedelta(seconds=step)

    def now(self) -> datetime:
        current = self.time
        self.time += self.step
        return current


def test_a_lease_that_took_too_long_to_write_is_let_go_before_the_table_starts(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    config = env.config()
    holdings = Holdings(config, env.leases, env.clock)
    changes = env.status_changes(config, holdings)
    work = env.claimed(changes, holdings, "r1")
    slow = SlowStore(START, step=56)  # the lease is written 56 s into its 60: under a poll left
    skew = env.skew(config)
    tables = Tables(config, env.mailbox, env.components(config), slow, changes, holdings, skew=skew)
    tables.next_table(work, START)
    assert env.runs == [] and work.lease is None
    lease = env.leases.current("sales")
    assert lease is not None and lease.released


def taken_over_by_etl_02(env: Environment) -> tuple[Tables, Work]:
    """etl-02 holds r1 as its status says and starts its next table."""
    taker, changes, taken = env.tables(env.config("etl-02"))
    found = changes.read("r1")
    request = env.mailbox.request("r1")
    assert found is not None and request is not None
    work = Work(request.value, found.value, found.etag)
    taken.add(work)
    taker.next_table(work, env.clock.now())
    return taker, work


def test_a_table_ended_under_its_lease_is_not_run_again_by_the_agent_that_took_over(
    env: Environment,
) -> None:
    # etl-01 was slow: etl-02 took r1 over while its first table ran to its end.
    tables, _, holdings, work = started(env, "sales", "customers")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    env.advance(10)
    finish(env)
    assert not tables.poll_run(work, env.clock.now())  # the done update finds it taken
    assert holdings.work == {}
    # Its run is recorded all the same, before its lease is let go: the table ran under it.
    [record] = env.mailbox.runs("r1")
    assert (record.table, record.agent, record.attempt, record.generation, record.outcome) == (
        "sales",
        "etl-01",
        1,
        1,
        Outcome.SUCCEEDED,
    )
    assert lease_of(env, "sales") == ("etl-01", 1, True)
    # The taker reads it once it holds the lease: sales is done, customers runs next.
    taker, work = taken_over_by_etl_02(env)
    assert [(run.job.table, run.job.agent) for run in env.runs] == [
        ("sales", "etl-01"),
        ("customers", "etl-02"),
    ]
    assert env.status("r1").tables_done == ["sales"]
    assert lease_of(env, "sales") == ("etl-02", 2, True)
    env.runs[-1].result = TableResult(True)
    taker.poll_run(work, env.clock.now())
    status = env.status("r1")
    assert (status.state, status.tables_done) == (State.SUCCEEDED, ["sales", "customers"])
    assert sorted((r.table, r.attempt) for r in env.mailbox.runs("r1")) == [
        ("customers", 2),
        ("sales", 1),
    ]


def test_a_failed_run_of_an_earlier_attempt_does_not_count_as_done(env: Environment) -> None:
    tables, _, _, work = started(env, "sales")
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    finish(env, succeeded=False, message="boom")
    tables.poll_run(work, env.clock.now())
    assert env.mailbox.runs("r1") == []  # a failure the request never saw: nothing owed
    taken_over_by_etl_02(env)
    assert [(run.job.table, run.job.agent) for run in env.runs] == [
        ("sales", "etl-01"),
        ("sales", "etl-02"),
    ]


def test_a_finish_whose_answer_was_lost_gets_its_run_record_though_retention_moved_it_meanwhile(
    env: Environment,
) -> None:
    # Seen in the simulator (seed 3 of test_with_crashes_pauses_and_store_errors_too, with
    # fewer reads a table): the final status landed and its answer was lost; retention moved
    # the request before the next poll, which found the status gone, dropped the request and
    # read the archive to learn whether its run was owed a record; that read failed, and as
    # no step of the agent looked at the request again, its table had no run record.
    tables, _, holdings, work = started(env, "sales")
    ended = env.clock.now()
    finish(env)
    with answers_lost(env), pytest.raises(StorageUnavailable):
        tables.poll_run(work, ended)
    env.advance(10)
    assert archive_files(env.mailbox, "r1", DAY, True, env.clock.now()) > 0
    env.storage.failing_reads = "archive/"
    with pytest.raises(StorageUnavailable):  # the poll reports the outage, as for any read
        tables.poll_run(work, env.clock.now())
    assert "r1" not in holdings.work and list(tables.owed) == ["r1"]
    tables.settle_owed(env.clock.now())  # the next poll, the archive still unreadable: kept
    assert list(tables.owed) == ["r1"]
    env.storage.failing_reads = None
    tables.settle_owed(env.clock.now())
    assert tables.owed == {}
    found = find_request_files(env.mailbox, "r1")
    assert found is not None and found.archived
    (record,) = found.runs
    assert (record.table, record.outcome, record.ended_at) == ("sales", Outcome.SUCCEEDED, ended)


def status_reads(env: Environment, request_id: str) -> list[str]:
    """Each read of the request's status from here on, as it happens."""
    reads: list[str] = []
    read = env.storage.read

    def counted(key: str) -> Blob | None:
        if key == f"status/{request_id}.json":
            reads.append(key)
        return read(key)

    env.storage.read = counted  # type: ignore[method-assign]
    return reads


def test_a_table_started_just_after_its_claim_landed_reads_no_status(env: Environment) -> None:
    # The claim landed under a record written now: no agent can judge this one lost for a
    # stale_after and a grace, so none can have taken the request over in the meantime.
    env.submit("r1", "sales", "stock")
    tables, changes, holdings = env.tables(env.config(), env.clock.now)
    work = env.claimed(changes, holdings, "r1")
    reads = status_reads(env, "r1")
    tables.next_table(work, env.clock.now())
    finish(env)
    env.advance(1)
    assert tables.poll_run(work, env.clock.now())  # sales recorded done: a write that landed
    tables.next_table(work, env.clock.now())
    assert [run.job.table for run in env.runs] == ["sales", "stock"]
    assert reads == []


def test_a_table_started_long_after_the_status_was_confirmed_reads_it_and_sees_a_takeover(
    env: Environment,
) -> None:
    env.submit("r1", "sales")
    tables, changes, holdings = env.tables(env.config(), lambda: START)  # none since the claim
    work = env.claimed(changes, holdings, "r1")
    env.advance(31)  # past stale_after / 2 (a pause, or a wait for the lease)
    env.write_status(held_by("r1", "etl-02", attempt(1, "etl-01"), attempt(2, "etl-02")))
    reads = status_reads(env, "r1")
    tables.next_table(work, env.clock.now())
    assert reads and env.runs == [] and holdings.work == {}


def test_a_status_write_whose_answer_was_lost_is_read_before_the_next_table(
    env: Environment,
) -> None:
    env.submit("r1", "sales", "stock")
    tables, changes, holdings = env.tables(env.config(), env.clock.now)
    work = env.claimed(changes, holdings, "r1")
    tables.next_table(work, env.clock.now())
    finish(env)
    with answers_lost(env), pytest.raises(StorageUnavailable):
        tables.poll_run(work, env.clock.now())
    assert work.seen_ours_under is None  # the write's outcome is unknown
    reads = status_reads(env, "r1")
    tables.poll_run(work, env.clock.now())
    tables.next_table(work, env.clock.now())
    assert reads  # read, and sales found done: stock runs next, sales not again
    assert [run.job.table for run in env.runs] == ["sales", "stock"]
