"""LocalFolderStorage passes the conformance suite, racing real processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdcore.testing.storage_suite import (
    BrokenBackendTests,
    StorageFactory,
    StorageSuite,
    UrlStorageFactory,
)


class TestLocalFolderStorage(StorageSuite):
    offers = (
        "BoundedRead",
        "ChangeCheck",
        "ListingChanges",
        "StoreClock",
        "VersionedListing",
        "WatchableStorage",
    )

    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        return UrlStorageFactory((tmp_path / "env").as_uri())


@pytest.mark.slow
class TestLocalFolderCatchesBrokenStores(BrokenBackendTests):
    """The suite, with quick flags, fails each broken store wrapped around a local folder."""

    race_workers = 4
    create_rounds = 20
    replace_rounds = 20
    listing_size = 100

    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        return UrlStorageFactory((tmp_path / "env").as_uri())
