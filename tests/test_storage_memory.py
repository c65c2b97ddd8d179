"""MemoryStorage passes the conformance suite; it lives in one process, so races use threads."""

from __future__ import annotations

import uuid

import pytest

from fdcore.testing.storage_suite import StorageFactory, StorageSuite, UrlStorageFactory


class TestMemoryStorage(StorageSuite):
    multiprocess = False
    offers = ("VersionedListing",)

    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        return UrlStorageFactory(f"memory://suite-{uuid.uuid4().hex}")
