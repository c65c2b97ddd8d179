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

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from unversioned import Unversioned

from fdcore.abc import Blob, Listed
from fdcore.builtin.memory import MemoryStorage
from fdcore.clock import ManualClock
from fdcore.contract.layout import agent_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, State, Status
from fdcore.mailbox.submit import submit
from fdcore.settings.agent_toml import RetentionConfig
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


def unversioned() -> MemoryFleet:
    fleet = MemoryFleet.fresh()
    fleet.wrap_storage(Unversioned)
    return fleet


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
    fleet = unversioned()
    fill(fleet, finished, in_flight=6)
    fleet.agent(
        "etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0, stale_after=60.0
    )
    fleet.agents["etl-01"].poll()  # the first poll reads every status once
    # Polls 5 s apart; the heartbeat of an agent holding nothing (stale_after / 2 = 30 s) is
    # due at the sixth.
    costs = [idle_poll(fleet, 5.0) for _ in range(6)]
    h = len(HOLDERS)
    assert costs == [2 + h, 2 + h, 2 + h, 2 + h, 2 + h, 2 + h + 1]


def test_a_holder_whose_record_moved_has_its_statuses_read_again() -> None:
    fleet = unversioned()
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
    fleet = unversioned()
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
    fleet = unversioned()
    fill(fleet, 300, in_flight=4)
    fleet.agent("etl-01", retention=NO_RETENTION, poll_seconds=5.0, stale_after=20.0)
    fleet.agents["etl-01"].poll()
    # Holding nothing, stale_after / 2 = 10 s: a heartbeat every other poll. The sweep every
    # 20 s reads the statuses in flight (W = 4) and no record: it takes nothing over, and its
    # sweeps are too far apart to tell a status it read is still what it says.
    costs = [idle_poll(fleet, 5.0) for _ in range(4)]
    assert costs == [2, 2 + 1, 2, 2 + 1 + 4]


# -- judged by the listing ------------------------------------------------------------------------
#
# A store whose listing carries each key's etag and last-modified time (VersionedListing) and
# that reports its time (StoreClock): every backend that ships does (local folder, OneLake, S3).
# Then an idle poll with take_over costs three lists (status/, requests/, agents/), whatever the
# fleet: a holder's heartbeat moves its record's etag and last-modified in the listing, which is
# all another agent judges it by; a record is read when first met, when it changes sooner than a
# heartbeat would (stopping, a new process, an agent of an older release that writes every poll),
# and before its agent is judged lost.


class ListedStore:
    """The fleet's memory store with a versioned listing and the store's time, both by the
    fleet's clock; counts its operations (a listing is one)."""

    def __init__(self, inner: MemoryStorage, clock: ManualClock) -> None:
        self.inner = inner
        self.clock = clock
        self.url = inner.url
        self.operations = 0
        self._stamps: dict[str, datetime] = {}
        self._written: datetime | None = None

    def _stamp(self, etag: str) -> str:
        self._written = self._stamps[etag] = self.clock.now()
        return etag

    def read(self, key: str) -> Blob | None:
        self.operations += 1
        return self.inner.read(key)

    def create(self, key: str, data: bytes) -> str:
        self.operations += 1
        return self._stamp(self.inner.create(key, data))

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self.operations += 1
        return self._stamp(self.inner.replace(key, data, etag))

    def delete(self, key: str, etag: str | None = None) -> None:
        self.operations += 1
        self.inner.delete(key, etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        self.operations += 1
        return self.inner.list(prefix)

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        self.operations += 1
        found = [(key, self.inner.read(key)) for key in self.inner.list(prefix)]
        now = self.clock.now()  # a version written past this view is stamped when first listed
        return iter(
            Listed(key, blob.etag, self._stamps.setdefault(blob.etag, now))
            for key, blob in found
            if blob is not None
        )

    def last_write_time(self) -> datetime | None:
        return self._written

    def close(self) -> None:
        pass


def listed_fleet(holders: int, finished: int, in_flight: int) -> tuple[MemoryFleet, ListedStore]:
    fleet = MemoryFleet.fresh()
    store = fleet.wrap_storage(lambda inner: ListedStore(inner, fleet.clock))
    names = [f"etl-{n:02d}" for n in range(2, 2 + holders)]
    for name in names:
        beat(fleet, name)
    mailbox = fleet.mailbox
    for n in range(finished + in_flight):
        request_id = f"r{n:05d}"
        submit(mailbox, ["sales"], request_id=request_id, now=START)
        holder = names[n % len(names)]
        state = State.SUCCEEDED if n < finished else State.RUNNING
        attempts = [Attempt(number=1, agent=holder, started_at=START)]
        status = Status(request_id, state, START, agent=holder, attempts=attempts)
        mailbox.create(status_key(request_id), status)
    return fleet, store


def listed_poll(fleet: MemoryFleet, store: ListedStore, seconds: float, beating: list[str]) -> int:
    """Advance the time, let ``beating`` beat, poll etl-01: the store operations of its poll."""
    fleet.clock.advance(seconds)
    for name in beating:
        beat(fleet, name)
    before = store.operations
    fleet.agents["etl-01"].poll()
    assert fleet.agents["etl-01"].idle
    return store.operations - before


@pytest.mark.parametrize(("holders", "finished"), [(2, 0), (20, 0), (20, 500)])
def test_by_the_listing_an_idle_polls_cost_is_three_lists_whatever_the_fleet(
    holders: int, finished: int
) -> None:
    fleet, store = listed_fleet(holders, finished, in_flight=40)
    fleet.agent("etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0)
    fleet.agents["etl-01"].poll()  # the first poll reads every status and record once
    names = [f"etl-{n:02d}" for n in range(2, 2 + holders)]
    # Polls 5 s apart; the holders' heartbeats (stale_after / 4 = 15 s) at every third: a new
    # version in the listing, no read; its own (holding nothing: stale_after / 2) at the sixth.
    costs = [listed_poll(fleet, store, 5.0, names if n % 3 == 2 else []) for n in range(6)]
    assert costs == [3, 3, 3, 3, 3, 3 + 1]


def test_by_the_listing_an_agent_that_writes_every_poll_costs_a_read_a_poll() -> None:
    """An agent of an older release rewrites its record every poll: sooner than a heartbeat."""
    fleet, store = listed_fleet(2, 0, in_flight=6)
    fleet.agent("etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0)
    fleet.agents["etl-01"].poll()
    costs = [listed_poll(fleet, store, 5.0, ["etl-02"]) for _ in range(3)]
    assert costs == [3 + 1, 3 + 1, 3 + 1]  # its own heartbeat (stale_after / 2) comes later


def test_by_the_listing_a_stopping_holders_requests_are_read_and_a_lost_ones_taken() -> None:
    fleet, store = listed_fleet(2, 0, in_flight=4)  # two statuses each
    agent = fleet.agent("etl-01", retention=NO_RETENTION, take_over=True, poll_seconds=5.0)
    agent.poll()
    # etl-02 starts stopping (its record, sooner than a heartbeat), then hands r00000 back.
    fleet.clock.advance(5.0)
    beat(fleet, "etl-02", stopping=True, requests=["r00000", "r00002"])
    found = fleet.mailbox.status("r00000")
    assert found is not None
    handed_back = found.value
    handed_back.agent, handed_back.state = None, State.ACCEPTED
    fleet.mailbox.replace(status_key("r00000"), handed_back, found.etag)
    before = store.operations
    agent.poll()
    # 3 lists, its record, the two statuses it held (one handed back and taken: a write and the
    # cancels/ listing of a poll that holds work)
    assert list(agent.held) == ["r00000"]
    assert store.operations - before >= 3 + 1 + 2
    # etl-03 falls silent: lost past stale_after + grace (60 + 60 s) by the store's time.
    for _ in range(30):
        fleet.finish_runs()
        fleet.clock.advance(5.0)
        agent.poll()
    assert {"r00001", "r00003"} <= {run.job.request for run in fleet.runs}


@pytest.mark.parametrize(
    "faults",
    [
        {},
        {"crash_rate": 6.0, "restart_after": 30.0},
        {"pause_rate": 6.0, "skew": 20.0},
        {"crash_rate": 3.0, "pause_rate": 3.0, "error_rate": 0.03},
    ],
    ids=["steady", "crashes", "pauses-skew", "errors"],
)
def test_a_sweep_asks_only_the_holders_whose_trust_changed_and_acts_as_if_it_asked_all(
    monkeypatch: pytest.MonkeyPatch, faults: dict[str, Any]
) -> None:
    """The sweep keeps each holder's trusted epoch while Liveness says it holds
    (``trusted_until``, ``changed_trust``), so a poll asks about a few holders, not every one
    whose statuses it read (64 a poll at 100 agents and 10,000 requests). What the fleet does is
    the same as when every sweep asks every holder: the same report, faults and all."""
    from fdcore.agent import discovery, liveness
    from fdcore.simulator import Scenario, simulate

    scenario = Scenario(
        seed=5, agents=10, requests=200, take_over=True, table_pool=100000, max_tables=1, **faults
    )
    counts = {"asked": 0, "held": 0}
    ask = liveness.Liveness.trusted_epoch
    refresh = discovery.Discovery._refresh_trust

    def counted_ask(self: liveness.Liveness, *args: object) -> int | None:
        counts["asked"] += 1
        return ask(self, *args)  # type: ignore[arg-type]

    def counted_refresh(self: discovery.Discovery, at: datetime) -> None:
        counts["held"] += len(self._held)
        refresh(self, at)

    monkeypatch.setattr(liveness.Liveness, "trusted_epoch", counted_ask)
    monkeypatch.setattr(discovery.Discovery, "_refresh_trust", counted_refresh)
    kept = simulate(scenario)
    assert kept.ok
    assert counts["held"] > 1000 and counts["asked"] < counts["held"] / 5

    def ask_all(self: discovery.Discovery, at: datetime) -> None:
        self._trust.clear()  # what the sweep did before: every holder at every sweep
        counts["held"] += len(self._held)
        refresh(self, at)

    monkeypatch.setattr(discovery.Discovery, "_refresh_trust", ask_all)
    counts.update(asked=0, held=0)
    asked_all = simulate(scenario)
    assert counts["asked"] >= counts["held"]
    assert asked_all.to_json(wall=False) == kept.to_json(wall=False)
