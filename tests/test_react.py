"""Between polls (Agent.react): tables back to back, a freed worker claims, slots fire on time.

A reaction moves work the moment something happens and touches the store only for what
happened; the poll stays the heartbeat (docs/agents.md, "Between polls").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from fdcore.abc import Blob
from fdcore.agent.core import Agent
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.layout import CANCELS, agent_key
from fdcore.contract.models import State
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.submit import submit
from fdcore.settings.agent_toml import ScheduleConfig
from fdcore.testing.memory_fleet import START, MemoryFleet

EVERY_SECOND = ScheduleConfig(id="tick", entities=("sales",), timing="every", spec="1s")


class Counting:
    """A store that counts the operations it passes to the in-memory one, by kind.

    ``list`` counts the looks' listings (``requests/``, ``status/``); the listing of operators'
    cancels, at most one a poll (docs/operations.md), counts as ``list cancels/``.
    """

    def __init__(self, inner: MemoryStorage) -> None:
        self.inner = inner
        self.url = inner.url
        self.operations: Counter[str] = Counter()

    def read(self, key: str) -> Blob | None:
        self.operations["read"] += 1
        return self.inner.read(key)

    def create(self, key: str, data: bytes) -> str:
        self.operations["create"] += 1
        return self.inner.create(key, data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self.operations["replace"] += 1
        return self.inner.replace(key, data, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self.operations["delete"] += 1
        self.inner.delete(key, etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        self.operations["list cancels/" if prefix == CANCELS else "list"] += 1
        return self.inner.list(prefix)

    def close(self) -> None:
        self.inner.close()


def tables_started(fleet: MemoryFleet) -> list[str]:
    return [f"{run.job.request}/{run.job.table}" for run in fleet.runs]


def test_a_finished_table_is_recorded_and_the_next_started_without_a_poll(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    store = fleet.wrap_storage(Counting)
    agent = fleet.agent("etl-01")
    submit(fleet.mailbox, ["sales", "stock", "orders"], request_id="r1", now=START)
    agent.poll()
    record = fleet.storage.read(agent_key("etl-01"))
    for table in ("stock", "orders"):
        fleet.finish_runs()
        agent.react()
        assert tables_started(fleet)[-1] == f"r1/{table}"
    fleet.finish_runs()
    agent.react()
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.state is State.SUCCEEDED
    assert status.value.tables_done == ["sales", "stock", "orders"]
    # No poll came in between: the record is the one the poll wrote, and nothing was listed.
    assert fleet.storage.read(agent_key("etl-01")) == record
    assert store.operations["list"] == 2  # the poll's look only
    assert store.operations["list cancels/"] == 1  # once, by the poll (this reaction did not look)


def test_a_reaction_with_nothing_to_do_touches_no_file(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    store = fleet.wrap_storage(Counting)
    agent = fleet.agent("etl-01", concurrency=2)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    agent.poll()
    before = sum(store.operations.values())
    for _ in range(5):
        agent.react()  # the table still runs, no slot is due, nothing was submitted
    assert sum(store.operations.values()) == before


def test_a_freed_worker_claims_the_work_its_last_look_left(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", claim="when_free", concurrency=1)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    submit(fleet.mailbox, ["stock"], request_id="r2", now=START + timedelta(seconds=1))
    agent.poll()
    assert tables_started(fleet) == ["r1/sales"]
    assert fleet.mailbox.status("r2") is None  # no room: left for later
    fleet.finish_runs()
    agent.react()
    assert tables_started(fleet) == ["r1/sales", "r2/stock"]


def test_a_freed_worker_does_not_look_when_nothing_was_left(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    store = fleet.wrap_storage(Counting)
    agent = fleet.agent("etl-01", claim="when_free", concurrency=1)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    agent.poll()
    fleet.finish_runs()
    lists = store.operations["list"]
    agent.react()
    assert store.operations["list"] == lists  # its last look found nothing else: no new look
    # A submission the store told of is looked for at once.
    submit(fleet.mailbox, ["stock"], request_id="r2", now=START)
    agent.react(new_work=True)
    assert tables_started(fleet) == ["r1/sales", "r2/stock"]


@pytest.mark.parametrize("take_over", [False, True], ids=["alone", "take_over"])
def test_every_poll_looks_after_a_reaction_that_looked(
    fdcore_memory_fleet: MemoryFleet, take_over: bool
) -> None:
    fleet = fdcore_memory_fleet
    store = fleet.wrap_storage(Counting)
    agent = fleet.agent("etl-01", claim="when_free", concurrency=1, take_over=take_over)
    for n in range(3):
        submit(fleet.mailbox, ["t"], request_id=f"r{n}", now=START + timedelta(seconds=n))
    agent.poll()
    fleet.finish_runs()
    agent.react()  # looks: its last look left two requests
    lists = store.operations["list"]
    fleet.finish_runs()  # its worker is free again at the poll: it could take work
    fleet.clock.advance(5)
    agent.poll()  # the discovery of work nobody announced (and with take_over, the sweep)
    assert store.operations["list"] == lists + 2


@pytest.mark.parametrize("take_over", [False, True], ids=["alone", "take_over"])
def test_a_poll_without_room_lists_nothing_and_announced_work_waits_for_no_poll(
    fdcore_memory_fleet: MemoryFleet, take_over: bool
) -> None:
    """An agent whose every worker is busy could claim nothing: its poll lists neither folder.
    It reads the change signal instead, so a request submitted meanwhile is claimed the moment
    a worker frees, not at the next poll."""
    fleet = fdcore_memory_fleet
    store = fleet.wrap_storage(Counting)
    agent = fleet.agent("etl-01", claim="when_free", concurrency=1, take_over=take_over)
    submit(fleet.mailbox, ["t"], request_id="r0", now=START)
    agent.poll()  # claims r0: no worker left
    assert tables_started(fleet) == ["r0/t"]
    lists = store.operations["list"]
    fleet.clock.advance(5)
    agent.poll()
    assert store.operations["list"] == lists  # a look could take nothing
    submit(fleet.mailbox, ["u"], request_id="r1", now=fleet.clock.now())  # announced
    fleet.clock.advance(5)
    agent.poll()  # still busy: it learns from the signal that work came
    assert store.operations["list"] == lists
    fleet.finish_runs()
    agent.react()  # r0's table ended: the freed worker looks at once
    assert tables_started(fleet) == ["r0/t", "r1/u"]


class EndingDuringALook(Counting):
    """A store whose next listing first runs ``during``: something that happens while a look
    is under way (another table of the agent ends)."""

    during: Callable[[], None] | None = None

    def list(self, prefix: str = "") -> Iterator[str]:
        if self.during is not None and prefix != CANCELS:
            during, self.during = self.during, None
            during()
        return super().list(prefix)


def _two_running_three_queued(fleet: MemoryFleet) -> tuple[EndingDuringALook, Agent]:
    """An agent with two workers that claimed r0 and r1 of five queued requests, r2..r4 left."""
    store = fleet.wrap_storage(EndingDuringALook)
    agent = fleet.agent("etl-01", claim="when_free", concurrency=2)
    for n in range(5):
        submit(fleet.mailbox, [f"t{n}"], request_id=f"r{n}", now=START)
    agent.poll()
    return store, agent


def test_a_worker_freed_during_a_look_takes_work_in_the_same_reaction(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    """A request that ends while the freed worker of another looks frees a second worker the
    look did not see. Its end is this reaction's to handle (no other comes for it): the agent
    looks again, rather than leave the worker idle until something else happens."""
    fleet = fdcore_memory_fleet
    store, agent = _two_running_three_queued(fleet)
    assert tables_started(fleet) == ["r0/t0", "r1/t1"]
    fleet.finish_runs("r0")
    store.during = lambda: fleet.finish_runs("r1")  # r1 ends as r0's freed worker looks
    fleet.clock.advance(1)
    agent.react()
    assert tables_started(fleet) == ["r0/t0", "r1/t1", "r2/t2", "r3/t3"]


def test_a_worker_freed_as_a_poll_starts_what_it_found_takes_work_at_the_next_reaction(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    """A request that ends while a poll looks is recorded as the poll starts what it found,
    after the look: the poll took that end's wake-up, so the reaction the runtime runs next
    (with nothing new of its own) looks for the freed worker, rather than leave it idle until
    the next poll."""
    fleet = fdcore_memory_fleet
    store, agent = _two_running_three_queued(fleet)
    fleet.finish_runs("r0")
    store.during = lambda: fleet.finish_runs("r1")  # r1 ends as the next poll looks
    fleet.clock.advance(5)
    agent.poll()  # r0's end frees the worker the look gives r2; r1's end is recorded after
    assert tables_started(fleet) == ["r0/t0", "r1/t1", "r2/t2"]
    agent.react()
    assert tables_started(fleet) == ["r0/t0", "r1/t1", "r2/t2", "r3/t3"]


def test_a_request_nobody_announced_is_claimed_at_the_next_poll_after_a_reaction(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    """A reaction's look does not stand for the next poll's: a request submitted after it and
    not announced (from another machine to a watched network folder, say) is claimed at the
    next poll, not the one after."""
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", poll_seconds=5)
    agent.poll()
    fleet.clock.advance(1)
    agent.react(new_work=True)  # a spurious call of the store's watch: nothing is there yet
    fleet.clock.advance(1)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=fleet.clock.now())  # unannounced
    fleet.clock.advance(3)
    agent.poll()
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.agent == "etl-01"
    assert tables_started(fleet) == ["r1/sales"]


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError("cannot write the record"),
        StorageUnavailable("agents/etl-03.json", "the store is down"),
    ],
    ids=["unwritable", "outage"],
)
def test_an_agent_whose_record_write_failed_takes_nothing_between_polls(
    fdcore_memory_fleet: MemoryFleet, failure: Exception
) -> None:
    """As in its polls: an agent that cannot say it is alive takes nothing, even when the store
    reports a submission (or its watch calls spuriously). Such an agent held what it claimed
    unseen by the fleet: on a store that reports its time it starts no table before its record
    measured its clock, and an agent with no readable record is never judged lost, so the
    others left its requests waiting (test_no_stray_file_stops_an_agent, under load)."""
    fleet = fdcore_memory_fleet
    blocked = fleet.agent("etl-03", schedules=(EVERY_SECOND,))

    def broken_write(*args: object, **kwargs: object) -> None:
        raise failure

    blocked.presence.write = broken_write  # type: ignore[method-assign]
    blocked.react(new_work=True)  # before its first poll
    blocked.poll()
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    fleet.clock.advance(1)  # a slot of its schedule falls due too
    for _ in range(3):
        blocked.react(new_work=True)
    assert list(fleet.storage.list("status/")) == [] and not blocked.held
    assert list(fleet.storage.list("requests/")) == ["requests/r1.json"]  # no slot's either
    assert tables_started(fleet) == []
    other = fleet.agent("etl-01")
    other.poll()  # the next poll of an agent that can say it is alive takes it
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.agent == "etl-01"
    assert "r1/sales" in tables_started(fleet)


def test_after_a_poll_whose_record_write_failed_a_reaction_takes_nothing(
    fdcore_memory_fleet: MemoryFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record that landed before is still fresh, but the poll whose write failed took
    nothing: nor does a reaction after it, until a poll has written the record again."""
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", stale_after=8.0)
    agent.poll()
    fleet.clock.advance(4)  # a heartbeat is due (stale_after / 2: it holds nothing)

    def refused(*args: object, **kwargs: object) -> None:
        raise StorageUnavailable("agents/etl-01.json", "the store refuses writes")

    monkeypatch.setattr(agent.presence, "write", refused)
    agent.poll()
    submit(fleet.mailbox, ["sales"], request_id="r1", now=fleet.clock.now())
    agent.react(new_work=True)
    assert fleet.mailbox.status("r1") is None and not agent.presence.silent(fleet.clock.now())
    monkeypatch.undo()
    agent.poll()
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.agent == "etl-01"


def test_a_slot_is_created_when_due_not_at_the_next_poll(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", poll_seconds=5, schedules=(EVERY_SECOND,))
    agent.poll()
    ran = set()
    for _ in range(10):  # ten seconds, no poll: the runtime wakes it at each due slot
        due = agent.next_due(fleet.clock.now())
        assert due is not None and due > fleet.clock.now()
        fleet.clock.advance((due - fleet.clock.now()).total_seconds())
        fleet.finish_runs()
        agent.react()
        ran.update(run.job.request for run in fleet.runs)
    assert len(ran) == 11  # the first poll's slot and the ten that fell due after it


def test_a_stopping_agent_has_no_due_slot(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", schedules=(EVERY_SECOND,))
    assert agent.next_due(START) == START + timedelta(seconds=1)
    agent.stop()
    assert agent.next_due(START) is None
    assert fleet.agent("etl-02").next_due(START) is None  # no schedules


def test_a_request_waiting_for_a_lease_wakes_when_the_lease_runs_out(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    holder = fleet.agent("etl-01", poll_seconds=5)
    waiter = fleet.agent("etl-02", poll_seconds=5)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    holder.poll()
    submit(fleet.mailbox, ["sales"], request_id="r2", now=START)
    waiter.poll()
    assert tables_started(fleet) == ["r1/sales"]
    # The holder stops renewing (paused, say): its lease runs out at expiry plus the grace, so
    # the waiter is woken then, though nothing is written and its next poll is not due.
    held = holder.tables.leases.current("sales")
    assert held is not None
    free = held.expires_at + timedelta(seconds=waiter.config.grace_seconds)
    assert waiter.next_wake(fleet.clock.now()) == free
    fleet.clock.advance((free - fleet.clock.now()).total_seconds() + 0.001)
    waiter.react()
    assert tables_started(fleet) == ["r1/sales", "r2/sales"]
    assert waiter.next_wake(fleet.clock.now()) is None  # nothing to wait for


def test_a_lease_the_agent_frees_itself_wakes_its_waiting_request_at_once(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", concurrency=2)
    # The clock stands still: r1 (claimed first) comes first in each pass, so it is refused
    # "sales" just before r2, later in the same pass, records it and frees the lease.
    submit(fleet.mailbox, ["stock", "sales"], request_id="r1", now=START)
    submit(fleet.mailbox, ["sales"], request_id="r2", now=START)
    agent.poll()
    assert sorted(tables_started(fleet)) == ["r1/stock", "r2/sales"]
    fleet.finish_runs()
    agent.react()
    assert agent.next_wake(fleet.clock.now()) == fleet.clock.now()  # react again at once
    agent.react()
    assert tables_started(fleet)[-1] == "r1/sales"
