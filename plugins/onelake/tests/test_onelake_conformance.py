"""The storage conformance suite (fdcore.testing), run against Azurite through the plugin."""

from __future__ import annotations

import pytest

from fdcore.testing.storage_suite import StorageFactory, StorageSuite, UrlStorageFactory


class TestOneLakeAzurite(StorageSuite):
    multiprocess = True
    # Azurite is one single-threaded Node process and CI has 2 cores: fewer racers and rounds
    # than the defaults keep this suite near 20 s while every race still runs in real processes.
    # Listing pages are proven separately (test_onelake_azurite.py, with a small page size).
    race_workers = 8
    create_rounds = 100
    replace_rounds = 50
    listing_size = 2_000

    @pytest.fixture
    def storage_factory(self, environment_url: str) -> StorageFactory:
        # No options: an Azurite URL opens with the emulator's development key.
        return UrlStorageFactory(environment_url)
