"""LocalFolderStorage passes the conformance suite, racing real processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdcore.testing.storage_suite import StorageFactory, StorageSuite, UrlStorageFactory


class TestLocalFolderStorage(StorageSuite):
    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        return UrlStorageFactory((tmp_path / "env").as_uri())
