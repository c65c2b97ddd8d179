"""The storage conformance suite: subclass :class:`StorageSuite` to prove a backend.

::

    from fdcore.testing.storage_suite import StorageSuite, StorageFactory, UrlStorageFactory

    class TestMyBackend(StorageSuite):
        multiprocess = True  # the store can be reopened in child processes

        @pytest.fixture
        def storage_factory(self, tmp_path) -> StorageFactory:
            return UrlStorageFactory(tmp_path.as_uri())

The suite is made of one mixin per property (like fsspec's ``tests/abstract``): a backend that
keeps only some promises, or is on its way to keeping them all, adopts those it keeps, e.g.
``class TestMyBackend(ReadDeleteTests, KeyTests)``, with the same ``storage_factory`` fixture.
Each mixin names the capability flags it reads; :class:`StorageSuite` composes them all.

Each test runs one probe of :mod:`fdcore.conformance.probes`, the same functions ``fdcore doctor``
runs against a live environment, and fails with what the probe observed.
"""

from __future__ import annotations

import pickle

import pytest

from fdcore.conformance.probes import (
    OPTIONAL_PROTOCOLS,
    Observation,
    ProbeContext,
    StorageFactory,
    UrlStorageFactory,
    probe_absent_key,
    probe_create_existing_refused,
    probe_create_if_absent,
    probe_create_read_delete,
    probe_delete_if_match,
    probe_distinct_keys,
    probe_exact_prefix,
    probe_invalid_keys,
    probe_large_payload,
    probe_list_after_write,
    probe_list_by_prefix,
    probe_list_paging,
    probe_listing_changes,
    probe_no_lost_updates,
    probe_no_partial_reads,
    probe_optional_protocols,
    probe_read_after_write,
    probe_replace_etag,
    probe_replace_if_match,
    probe_size_bound,
    probe_stale_etag_refused,
    probe_unusual_keys,
    probe_versioned_listing,
)
from fdcore.testing.broken import BROKEN_STORES, BrokenStorage, catch

__all__ = [
    "BrokenBackendTests",
    "ConsistencyTests",
    "CreateIfAbsentTests",
    "KeyTests",
    "ListTests",
    "OptionalProtocolTests",
    "PayloadTests",
    "RaceTests",
    "ReadDeleteTests",
    "ReplaceIfMatchTests",
    "StorageFactory",
    "StorageSuite",
    "StorageTestsBase",
    "UrlStorageFactory",
]


def _offers(store: object, protocol: str) -> bool:
    return isinstance(store, OPTIONAL_PROTOCOLS[protocol])


def _require(observation: Observation) -> None:
    if not observation.passed:
        pytest.fail(str(observation), pytrace=False)


class StorageTestsBase:
    """What every mixin shares: the ``storage_factory`` fixture a backend defines, the probes'
    context, and the capability flags (class attributes; each mixin says which it reads)."""

    #: The store can be reopened in child processes; races then use real processes.
    #: False (an in-process store such as ``memory://``) races threads instead.
    multiprocess: bool = True
    #: Largest value to round-trip, in bytes.
    max_payload: int = 1 << 20
    #: Keys written for the large list-by-prefix test.
    listing_size: int = 10_000
    #: Racers per round, and rounds, of the create-if-absent and replace-if-match races.
    race_workers: int = 16
    create_rounds: int = 200
    replace_rounds: int = 100
    #: Handles creating the listing's keys at once (raise it for a high-latency store).
    write_threads: int = 8
    #: The most keys one request of the store's listing returns; the paging test lists twice
    #: that plus one. None: the store's ``list_page_size`` attribute if it has one, else 1000.
    list_page_size: int | None = None
    #: Processes of the replace storm (and of the delete race), and the replaces each lands.
    storm_workers: int = 4
    storm_writes: int = 25
    #: Rounds of the delete-if-match race.
    delete_rounds: int = 10
    #: The optional protocols your store offers, by name ("BoundedRead", "ChangeCheck",
    #: "StoreClock", "VersionedListing", "WatchableStorage"): one that goes missing then fails
    #: the suite.
    offers: tuple[str, ...] = ()

    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        """A picklable zero-argument callable returning a Storage on a fresh, empty environment.

        Every call within one test opens that same environment (other processes included).
        """
        raise NotImplementedError(f"{type(self).__name__} must define the storage_factory fixture")

    @pytest.fixture
    def probe_context(self, storage_factory: StorageFactory) -> ProbeContext:
        return ProbeContext(
            storage_factory,
            multiprocess=self.multiprocess,
            processes=self.race_workers,
            create_rounds=self.create_rounds,
            replace_rounds=self.replace_rounds,
            max_payload=self.max_payload,
            listing_size=self.listing_size,
            threads=self.write_threads,
            list_page_size=self.list_page_size,
            storm_workers=self.storm_workers,
            storm_writes=self.storm_writes,
            delete_rounds=self.delete_rounds,
            offers=self.offers,
        )

    def test_factory_opens_an_empty_environment(self, storage_factory: StorageFactory) -> None:
        store = storage_factory()
        try:
            found = list(store.list())
        finally:
            store.close()
        assert found == [], f"storage_factory must give an empty environment; found {found[:5]}"


class ReadDeleteTests(StorageTestsBase):
    """Create, read back from another handle, delete; an absent key reads as None; delete with
    an etag deletes only that version, and of racers holding it exactly one wins.
    Flags: ``multiprocess``, ``storm_workers``, ``delete_rounds``."""

    def test_create_read_delete(self, probe_context: ProbeContext) -> None:
        _require(probe_create_read_delete(probe_context))

    def test_absent_key(self, probe_context: ProbeContext) -> None:
        _require(probe_absent_key(probe_context))

    def test_delete_if_match(self, probe_context: ProbeContext) -> None:
        _require(probe_delete_if_match(probe_context))


class ConsistencyTests(StorageTestsBase):
    """Right after a create, replace or delete returned, a read and a listing from another
    handle (another process with ``multiprocess``) see it. Flags: ``multiprocess``."""

    def test_read_after_write(self, probe_context: ProbeContext) -> None:
        _require(probe_read_after_write(probe_context))

    def test_list_after_write(self, probe_context: ProbeContext) -> None:
        _require(probe_list_after_write(probe_context))


class CreateIfAbsentTests(StorageTestsBase):
    """Create refuses a key that exists, leaving its value. No flags (the race is
    :class:`RaceTests`)."""

    def test_create_existing_refused(self, probe_context: ProbeContext) -> None:
        _require(probe_create_existing_refused(probe_context))


class ReplaceIfMatchTests(StorageTestsBase):
    """Replace gives a new etag and refuses a stale one. No flags (the race is
    :class:`RaceTests`)."""

    def test_replace_gives_new_etag(self, probe_context: ProbeContext) -> None:
        _require(probe_replace_etag(probe_context))

    def test_stale_etag_refused(self, probe_context: ProbeContext) -> None:
        _require(probe_stale_etag_refused(probe_context))


class KeyTests(StorageTestsBase):
    """Invalid keys are refused; every legal character round-trips; keys that differ only by
    case or Unicode form are different keys. No flags."""

    def test_invalid_keys(self, probe_context: ProbeContext) -> None:
        _require(probe_invalid_keys(probe_context))

    def test_unusual_keys(self, probe_context: ProbeContext) -> None:
        _require(probe_unusual_keys(probe_context))

    def test_distinct_keys(self, probe_context: ProbeContext) -> None:
        _require(probe_distinct_keys(probe_context))


class PayloadTests(StorageTestsBase):
    """Values up to ``max_payload`` bytes round-trip exactly; a bounded read returns a value of
    exactly its bound and refuses one byte more. Flags: ``max_payload``."""

    def test_large_payload(self, probe_context: ProbeContext) -> None:
        _require(probe_large_payload(probe_context))

    def test_size_bound(self, probe_context: ProbeContext) -> None:
        _require(probe_size_bound(probe_context))


class ListTests(StorageTestsBase):
    """List by prefix gives every key starting with the prefix exactly, once, in code point
    order, across every page of the store's listing. Flags: ``listing_size``,
    ``list_page_size``, ``write_threads``."""

    def test_exact_prefix(self, probe_context: ProbeContext) -> None:
        _require(probe_exact_prefix(probe_context))

    def test_list_paging(self, probe_context: ProbeContext) -> None:
        _require(probe_list_paging(probe_context))

    @pytest.mark.slow
    def test_list_by_prefix(self, probe_context: ProbeContext) -> None:
        _require(probe_list_by_prefix(probe_context))


class RaceTests(StorageTestsBase):
    """Conditional writes hold under contention, no update is lost in a storm of replaces, and
    readers never see half a value. Flags: ``multiprocess``, ``race_workers``,
    ``create_rounds``, ``replace_rounds``, ``storm_workers``, ``storm_writes``,
    ``max_payload`` (the largest value the partial-read race writes, up to 256 KiB)."""

    def test_factory_is_picklable(self, storage_factory: StorageFactory) -> None:
        if not self.multiprocess:
            pytest.skip("races run in threads (multiprocess = False)")
        copy = pickle.loads(pickle.dumps(storage_factory))
        store = copy()
        store.close()

    @pytest.mark.slow
    def test_create_if_absent_race(self, probe_context: ProbeContext) -> None:
        _require(probe_create_if_absent(probe_context))

    @pytest.mark.slow
    def test_replace_if_match_race(self, probe_context: ProbeContext) -> None:
        _require(probe_replace_if_match(probe_context))

    @pytest.mark.slow
    def test_no_lost_updates(self, probe_context: ProbeContext) -> None:
        _require(probe_no_lost_updates(probe_context))

    @pytest.mark.slow
    def test_readers_never_see_partial_values(self, probe_context: ProbeContext) -> None:
        _require(probe_no_partial_reads(probe_context))


class OptionalProtocolTests(StorageTestsBase):
    """The optional protocols a backend implements (``StoreClock``, ``ChangeCheck``,
    ``VersionedListing``) keep their contracts; one it does not implement is not tested, unless
    ``offers`` names it. Flags: ``offers``."""

    def test_optional_protocols(self, probe_context: ProbeContext) -> None:
        _require(probe_optional_protocols(probe_context))

    def test_versioned_listing(self, probe_context: ProbeContext) -> None:
        _require(probe_versioned_listing(probe_context))

    def test_listing_changes(self, probe_context: ProbeContext) -> None:
        _require(probe_listing_changes(probe_context))


# pytest collects a base class's tests before its subclass's: listed last, the quick
# single-handle properties run first and the races last.
class StorageSuite(
    RaceTests,
    ListTests,
    ConsistencyTests,
    PayloadTests,
    KeyTests,
    OptionalProtocolTests,
    ReplaceIfMatchTests,
    CreateIfAbsentTests,
    ReadDeleteTests,
):
    """The tests every storage backend passes: every property mixin above."""


class BrokenBackendTests(StorageTestsBase):
    """Opt-in, beside :class:`StorageSuite`: the suite, with this class's flags, fails each
    deliberately broken store of :mod:`fdcore.testing.broken` wrapped around your backend,
    naming the promise it breaks. It proves your flags (fewer rounds, a page size) still leave
    the suite its teeth. Flags: all of the suite's."""

    @pytest.mark.parametrize("broken", BROKEN_STORES, ids=lambda kind: kind.__name__)
    def test_suite_catches(self, probe_context: ProbeContext, broken: type[BrokenStorage]) -> None:
        store = probe_context.factory()
        try:
            lacking = [name for name in broken.requires if not _offers(store, name)]
        finally:
            store.close()
        if lacking:
            pytest.skip(f"{broken.__name__} breaks {lacking[0]}, which the store does not offer")
        observation = catch(probe_context, broken)
        assert not observation.passed, (
            f"the suite passed {broken.__name__}, which breaks {broken.promise} "
            f"({broken.describe()}): {observation}"
        )
        assert observation.name == broken.promise, str(observation)
