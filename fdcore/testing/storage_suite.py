"""The storage conformance suite: subclass :class:`StorageSuite` to prove a backend.

::

    from fdcore.testing.storage_suite import StorageSuite, StorageFactory, UrlStorageFactory

    class TestMyBackend(StorageSuite):
        multiprocess = True  # the store can be reopened in child processes

        @pytest.fixture
        def storage_factory(self, tmp_path) -> StorageFactory:
            return UrlStorageFactory(tmp_path.as_uri())

Each test runs one probe of :mod:`fdcore.testing.probes`, the same functions ``fdcore doctor``
runs against a live environment, and fails with what the probe observed.
"""

from __future__ import annotations

import pickle

import pytest

from fdcore.conformance.probes import (
    Observation,
    ProbeContext,
    StorageFactory,
    UrlStorageFactory,
    probe_absent_key,
    probe_create_existing_refused,
    probe_create_if_absent,
    probe_create_read_delete,
    probe_invalid_keys,
    probe_large_payload,
    probe_list_by_prefix,
    probe_no_partial_reads,
    probe_replace_etag,
    probe_replace_if_match,
    probe_stale_etag_refused,
    probe_unusual_keys,
)

__all__ = ["StorageFactory", "StorageSuite", "UrlStorageFactory"]


def _require(observation: Observation) -> None:
    if not observation.passed:
        pytest.fail(str(observation), pytrace=False)


class StorageSuite:
    """The tests every storage backend passes. Capability flags are class attributes."""

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
        )

    def test_factory_opens_an_empty_environment(self, storage_factory: StorageFactory) -> None:
        store = storage_factory()
        try:
            found = list(store.list())
        finally:
            store.close()
        assert found == [], f"storage_factory must give an empty environment; found {found[:5]}"

    def test_factory_is_picklable(self, storage_factory: StorageFactory) -> None:
        if not self.multiprocess:
            pytest.skip("races run in threads (multiprocess = False)")
        copy = pickle.loads(pickle.dumps(storage_factory))
        store = copy()
        store.close()

    def test_create_read_delete(self, probe_context: ProbeContext) -> None:
        _require(probe_create_read_delete(probe_context))

    def test_replace_gives_new_etag(self, probe_context: ProbeContext) -> None:
        _require(probe_replace_etag(probe_context))

    def test_stale_etag_refused(self, probe_context: ProbeContext) -> None:
        _require(probe_stale_etag_refused(probe_context))

    def test_absent_key(self, probe_context: ProbeContext) -> None:
        _require(probe_absent_key(probe_context))

    def test_create_existing_refused(self, probe_context: ProbeContext) -> None:
        _require(probe_create_existing_refused(probe_context))

    def test_invalid_keys(self, probe_context: ProbeContext) -> None:
        _require(probe_invalid_keys(probe_context))

    def test_unusual_keys(self, probe_context: ProbeContext) -> None:
        _require(probe_unusual_keys(probe_context))

    def test_large_payload(self, probe_context: ProbeContext) -> None:
        _require(probe_large_payload(probe_context))

    @pytest.mark.slow
    def test_list_by_prefix(self, probe_context: ProbeContext) -> None:
        _require(probe_list_by_prefix(probe_context))

    @pytest.mark.slow
    def test_create_if_absent_race(self, probe_context: ProbeContext) -> None:
        _require(probe_create_if_absent(probe_context))

    @pytest.mark.slow
    def test_replace_if_match_race(self, probe_context: ProbeContext) -> None:
        _require(probe_replace_if_match(probe_context))

    @pytest.mark.slow
    def test_readers_never_see_partial_values(self, probe_context: ProbeContext) -> None:
        _require(probe_no_partial_reads(probe_context))
