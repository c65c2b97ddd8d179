"""MemoryStorage passes the conformance suite; it lives in one process, so races use threads."""

from __future__ import annotations

import builtins
import contextlib
import time
import uuid
from collections.abc import Iterator

import attrs
import pytest

from fdcore.abc import Blob, Storage
from fdcore.builtin.memory import MemoryStorage
from fdcore.conformance.probes import (
    Probe,
    ProbeContext,
    probe_create_existing_refused,
    probe_create_if_absent,
    probe_invalid_keys,
    probe_list_by_prefix,
    probe_no_partial_reads,
    probe_replace_etag,
    probe_replace_if_match,
    probe_stale_etag_refused,
)
from fdcore.errors import AlreadyExists, InvalidKey, NotFound, StorageUnavailable
from fdcore.testing.storage_suite import StorageFactory, StorageSuite, UrlStorageFactory


class TestMemoryStorage(StorageSuite):
    multiprocess = False

    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        return UrlStorageFactory(f"memory://suite-{uuid.uuid4().hex}")


# -- the suite has teeth: each kind of broken store fails the probe for its property -----------


class _Broken(MemoryStorage):
    """A memory store with one promise broken; each subclass breaks a different one."""


class OverwritingCreate(_Broken):
    def create(self, key: str, data: bytes) -> str:
        current = self.read(key)
        return (
            super().create(key, data) if current is None else self.replace(key, data, current.etag)
        )


class CheckThenCreate(_Broken):
    def create(self, key: str, data: bytes) -> str:
        if self.read(key) is not None:
            raise AlreadyExists(key, "already exists")
        time.sleep(0.001)  # another creator runs between the check and the write
        with contextlib.suppress(AlreadyExists):
            return super().create(key, data)
        current = self.read(key)
        assert current is not None
        return self.replace(key, data, current.etag)


class UnreachableOnCreate(_Broken):
    def create(self, key: str, data: bytes) -> str:
        raise StorageUnavailable(key, "connection reset")


class EtagBlindReplace(_Broken):
    def replace(self, key: str, data: bytes, etag: str) -> str:
        current = self.read(key)
        if current is None:
            raise NotFound(key, "does not exist")
        return super().replace(key, data, current.etag)


class TornReplace(_Broken):
    def replace(self, key: str, data: bytes, etag: str) -> str:
        half = super().replace(key, data[: len(data) // 2], etag)  # written in two steps
        time.sleep(0.0005)
        return super().replace(key, data, half)


class FolderListing(_Broken):
    def list(self, prefix: str = "") -> Iterator[str]:
        folder = prefix if prefix.endswith("/") or not prefix else prefix + "/"
        return (key for key in super().list(prefix) if key.startswith(folder) or key == prefix)


class UnsortedListing(_Broken):
    def list(self, prefix: str = "") -> Iterator[str]:
        return reversed(builtins.list(super().list(prefix)))


class LaxKeys(_Broken):
    def read(self, key: str) -> Blob | None:
        try:
            return super().read(key)
        except InvalidKey:
            return None


class SameEtagAfterReplace(_Broken):
    def replace(self, key: str, data: bytes, etag: str) -> str:
        super().replace(key, data, etag)
        return etag


@attrs.frozen
class BrokenFactory:
    kind: type[MemoryStorage]
    name: str

    def __call__(self) -> Storage:
        return self.kind(self.name)


@pytest.mark.parametrize(
    ("kind", "probe", "observed"),
    [
        (OverwritingCreate, probe_create_existing_refused, "second create succeeded"),
        (CheckThenCreate, probe_create_if_absent, "winners (workers"),
        (UnreachableOnCreate, probe_create_if_absent, "create raised StorageUnavailable"),
        (EtagBlindReplace, probe_stale_etag_refused, "replace with stale etag succeeded"),
        (EtagBlindReplace, probe_replace_if_match, "winners (workers"),
        (TornReplace, probe_no_partial_reads, "a partial value"),
        (FolderListing, probe_list_by_prefix, "list of prefix 'a/b' gave ['a/b/y']"),
        (UnsortedListing, probe_list_by_prefix, "not give every key once, in sorted order"),
        (LaxKeys, probe_invalid_keys, "read('') succeeded, expected InvalidKey"),
        (SameEtagAfterReplace, probe_replace_etag, "already used before"),
    ],
)
def test_probe_catches_a_broken_store(
    kind: type[MemoryStorage], probe: Probe, observed: str
) -> None:
    factory = BrokenFactory(kind, f"broken-{uuid.uuid4().hex}")
    ctx = ProbeContext(
        factory,
        multiprocess=False,
        processes=8,
        create_rounds=20,
        replace_rounds=20,
        listing_size=100,
    )
    observation = probe(ctx)
    assert not observation.passed
    assert observed in observation.detail
    assert str(observation).startswith(f"FAIL {observation.name}: observed ")
    # The same probe passes on the sound store, so it is the broken promise it caught.
    assert probe(attrs.evolve(ctx, factory=BrokenFactory(MemoryStorage, uuid.uuid4().hex))).passed
