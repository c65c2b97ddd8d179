"""The storage conformance suite (fdcore.testing), run on Azurite through the plugin's store."""

from __future__ import annotations

import pytest
from fdcore_onelake.testing import SmallPagesFactory

from fdcore.testing.storage_suite import StorageFactory, StorageSuite

pytestmark = pytest.mark.processes


class TestOneLakeAzurite(StorageSuite):
    multiprocess = True
    # Azurite is one single-threaded Node process and CI has 2 cores: fewer racers and rounds
    # than the defaults keep this suite near 20 s while every race still runs in real processes.
    race_workers = 8
    create_rounds = 100
    replace_rounds = 50
    listing_size = 2_000
    offers = ("BoundedRead", "ChangeCheck", "StoreClock", "VersionedListing")

    @pytest.fixture
    def storage_factory(self, environment_url: str) -> StorageFactory:
        # No options: an Azurite URL opens with the emulator's development key. Listing pages
        # of 100 keys: the paging test then crosses two page boundaries in 201 keys.
        return SmallPagesFactory(environment_url, page=100)
