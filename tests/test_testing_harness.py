"""fdcore.testing itself: the fleets, the assertions and the storage-suite mixins have teeth."""

from __future__ import annotations

import sys
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.testing import storage_suite
from fdcore.testing.assertions import (
    assert_each_table_succeeded_once,
    assert_no_double_writers,
    assert_taken_over,
    double_writers,
)
from fdcore.testing.memory_fleet import START, MemoryFleet
from fdcore.testing.storage_suite import KeyTests, StorageFactory, UrlStorageFactory
from fdcore.testing.tables import TableWrite, table_writes

pytestmark = pytest.mark.processes

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def write(agent: str, token: int, start: float, end: float, **fields: object) -> TableWrite:
    values: dict[str, object] = {"rejected": None, **fields}
    return TableWrite(agent, "sales", "r1", token, token, start, end, **values)  # type: ignore[arg-type]


# -- assertions ------------------------------------------------------------------------------------


def test_double_writers_finds_overlapping_accepted_writes_under_different_tokens() -> None:
    first, second = write("a", 1, 0.0, 2.0), write("b", 2, 1.0, 3.0)
    assert double_writers([second, first]) == [(first, second)]
    with pytest.raises(AssertionError, match=r"1 tables written by two agents at once: sales: a"):
        assert_no_double_writers([first, second])


def test_double_writers_ignores_one_token_refused_writes_and_writes_one_after_another() -> None:
    long = write("a", 1, 0.0, 10.0)
    writes = [
        long,
        write("a", 1, 1.0, 2.0),  # the same token: one writer
        write("b", 2, 3.0, 4.0, rejected="stale token"),  # refused by the fencing check
        write("c", 3, 5.0, 6.0, rejected=None, killed=True),  # its agent died instead
        write("d", 4, 10.0, 11.0),  # starts as the long one ends
    ]
    assert double_writers(writes) == []
    assert_no_double_writers(writes)
    # An overlap with the longest span so far is found even after shorter spans in between.
    late = write("e", 5, 9.0, 9.5)
    assert double_writers([*writes, late]) == [(long, late)]


def lost_and_taken_over(fleet: MemoryFleet) -> None:
    """etl-01 claims r1 and goes silent; etl-02 takes it over after stale_after + grace."""
    lost = fleet.agent("etl-01")
    taker = fleet.agent("etl-02", take_over=True)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    lost.poll()
    for _ in range(30):  # 150 s: past stale_after (60) + grace (60)
        fleet.clock.advance(5)
        taker.poll()


def test_assert_taken_over_returns_the_taking_attempt(fdcore_memory_fleet: MemoryFleet) -> None:
    lost_and_taken_over(fdcore_memory_fleet)
    taking = assert_taken_over(fdcore_memory_fleet.mailbox, "r1", "etl-01", within=130, timeout=0)
    assert (taking.agent, taking.number) == ("etl-02", 2)
    # The takeover came 120 s (+ one 5 s poll) after etl-01's last heartbeat at START.
    assert timedelta(seconds=120) <= taking.started_at - START <= timedelta(seconds=125)


def test_assert_taken_over_fails_when_too_late_or_never(fdcore_memory_fleet: MemoryFleet) -> None:
    mailbox = fdcore_memory_fleet.mailbox
    lost_and_taken_over(fdcore_memory_fleet)
    with pytest.raises(AssertionError, match=r"taken over by 'etl-02' 12\d\.00 s after 'etl-01'"):
        assert_taken_over(mailbox, "r1", "etl-01", within=60, timeout=0)
    with pytest.raises(AssertionError, match=r"was not taken over from 'etl-02' within 0.2 s"):
        assert_taken_over(mailbox, "r1", "etl-02", within=60, timeout=0.2)
    with pytest.raises(AssertionError, match=r"agent 'nobody' has no record"):
        assert_taken_over(mailbox, "r1", "nobody", within=60, timeout=0)


def test_assert_each_table_succeeded_once(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01")
    submit(fleet.mailbox, ["sales", "stock"], request_id="r1", now=START)
    agent.poll()
    fleet.finish_runs()
    agent.poll()
    with pytest.raises(AssertionError, match=r"successful runs per table \{'sales': 1\}"):
        assert_each_table_succeeded_once(fleet.mailbox, "r1")
    fleet.finish_runs()
    agent.poll()
    assert_each_table_succeeded_once(fleet.mailbox, "r1")
    with pytest.raises(AssertionError, match="request 'r9' is not in the mailbox"):
        assert_each_table_succeeded_once(fleet.mailbox, "r9")


# -- the in-process fleet --------------------------------------------------------------------------


def test_a_skewed_agent_clock_moves_with_the_fleet_clock(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    fleet.agent("ahead", skew=30).poll()
    fleet.agent("even").poll()
    fleet.clock.advance(100)
    fleet.agents["ahead"].poll()
    ahead, even = fleet.mailbox.agent("ahead"), fleet.mailbox.agent("even")
    assert ahead is not None and even is not None
    assert ahead.value.updated_at == START + timedelta(seconds=130)
    assert even.value.updated_at == START


class CountingStore(MemoryStorage):
    """Another handle on the wrapped store's objects that counts the creates made through it."""

    def __init__(self, inner: MemoryStorage) -> None:
        super().__init__(inner.url.removeprefix("memory://"))
        self.inner = inner
        self.creates = 0

    def create(self, key: str, data: bytes) -> str:
        self.creates += 1
        return super().create(key, data)


def test_agents_use_the_wrapped_store_and_the_test_the_store_itself(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    before = fleet.agent("before")
    store = fleet.wrap_storage(CountingStore)
    after = fleet.agent("after")
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)  # through the store itself
    assert store.creates == 0
    before.poll()  # its record, its claim: not through the wrapper
    assert store.creates == 0
    after.poll()  # its record
    assert store.creates == 1
    assert isinstance(fleet.agent_storage, CountingStore) and fleet.storage is store.inner


def test_finish_runs_ends_the_named_requests_runs_only(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", concurrency=2)
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    submit(fleet.mailbox, ["stock"], request_id="r2", now=START)
    agent.poll()
    fleet.finish_runs("r2", succeeded=False)
    agent.poll()
    r1, r2 = fleet.mailbox.status("r1"), fleet.mailbox.status("r2")
    assert r1 is not None and r1.value.state is State.RUNNING
    assert r2 is not None and r2.value.state is State.FAILED
    assert r2.value.message == "table stock failed: boom"
    assert fleet.runs_of("sales") == ["etl-01#1"]


# -- the fleet of real processes -------------------------------------------------------------------


def succeeded(mailbox: Mailbox) -> list[str]:
    return [row.id for row in queue_rows(mailbox) if row.state == "succeeded"]


def test_every_agent_config_gets_the_fleets_storage_options(tmp_path: Path) -> None:
    # A store that takes options (a local folder refuses any: docs/agents.md, [storage]).
    url = "memory://fleet-options"
    fleet = AgentFleet(tmp_path, url, {"account": "a", "region": "x"})
    fleet.add("etl-01", {"agent": {"poll_seconds": 1}, "storage": {"region": "y"}})
    fleet.add("etl-02", {"agent": {}})
    first = tomllib.loads((tmp_path / "etl-01.toml").read_text())
    second = tomllib.loads((tmp_path / "etl-02.toml").read_text())
    assert first["storage"] == {"account": "a", "region": "y"}  # its own section wins
    assert second["storage"] == {"account": "a", "region": "x"}
    assert second["agent"] == {"name": "etl-02", "environment": url}
    assert "storage" not in tomllib.loads(
        AgentFleet(tmp_path, "memory://x").add("plain", {"agent": {}}).config.read_text()
    )


def test_agents_import_table_functions_from_the_fleets_pythonpath(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    folder = tmp_path / "my-tables"
    folder.mkdir()
    (folder / "my_tables.py").write_text(
        textwrap.dedent(
            """
            from fdcore.testing.tables import write_table

            def logged_twice(job):
                write_table(job)
                write_table(job)
            """
        )
    )
    fdcore_fleet.add_pythonpath(folder)
    mailbox = fdcore_fleet.mailbox
    submit(mailbox, ["sales", "stock"], request_id="r1")
    runner = {"kind": "python", "function": "my_tables:logged_twice"}
    agent = fdcore_fleet.add("etl-01", {"agent": {"poll_seconds": 0.1}, "runner": runner})
    agent.start()
    try:
        assert wait_until(lambda: "r1" in succeeded(mailbox), 30), agent.output()
    finally:
        codes = fdcore_fleet.stop_all()
    assert codes == {"etl-01": 0}
    writes = sorted(table_writes(fdcore_fleet), key=lambda w: w.start)
    assert [(w.agent, w.table, w.request, w.rejected) for w in writes] == [
        ("etl-01", table, "r1", None) for table in ("sales", "sales", "stock", "stock")
    ]
    assert_no_double_writers(writes)


# -- the storage suite's mixins --------------------------------------------------------------------

MIXINS = [
    storage_suite.ReadDeleteTests,
    storage_suite.ConsistencyTests,
    storage_suite.CreateIfAbsentTests,
    storage_suite.ReplaceIfMatchTests,
    storage_suite.KeyTests,
    storage_suite.OptionalProtocolTests,
    storage_suite.PayloadTests,
    storage_suite.ListTests,
    storage_suite.RaceTests,
]


def own_tests(cls: type) -> set[str]:
    return {name for name in vars(cls) if name.startswith("test_")}


def test_the_suite_is_its_mixins_and_each_test_belongs_to_one() -> None:
    base = own_tests(storage_suite.StorageTestsBase)
    assert base == {"test_factory_opens_an_empty_environment"}
    every = [name for mixin in MIXINS for name in own_tests(mixin)]
    assert len(every) == len(set(every)) == 24
    suite = {name for name in dir(storage_suite.StorageSuite) if name.startswith("test_")}
    assert suite == base | set(every)
    assert own_tests(storage_suite.StorageSuite) == set()
    assert set(storage_suite.StorageSuite.__mro__) >= {*MIXINS, storage_suite.StorageTestsBase}
    # The broken-store check is opt-in: it runs the probes again, one per broken store.
    assert storage_suite.BrokenBackendTests not in storage_suite.StorageSuite.__mro__


class TestKeysAloneOnMemory(KeyTests):
    """A backend adopting one mixin runs its tests, and the base's, and nothing else."""

    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        return UrlStorageFactory(f"memory://keys-{uuid.uuid4().hex}")

    def test_only_the_mixins_tests_are_here(self) -> None:
        names = {name for name in dir(self) if name.startswith("test_")}
        assert names == {
            "test_factory_opens_an_empty_environment",
            "test_invalid_keys",
            "test_unusual_keys",
            "test_distinct_keys",
            "test_only_the_mixins_tests_are_here",
        }
