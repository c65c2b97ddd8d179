"""The storage conformance suite (fdcore.testing), run against the S3 emulator."""

from __future__ import annotations

import pytest
from fdcore_s3.testing import S3Emulator, SmallPagesFactory

from fdcore.testing.storage_suite import BrokenBackendTests, StorageFactory, StorageSuite

pytestmark = pytest.mark.processes


class TestS3Emulator(StorageSuite):
    multiprocess = True
    # One emulator serving one request at a time on 2 cores: fewer racers and rounds than the
    # defaults, every race still in real processes.
    race_workers = 4
    create_rounds = 25
    replace_rounds = 15
    listing_size = 500
    offers = ("BoundedRead", "ChangeCheck", "StoreClock", "VersionedListing")

    @pytest.fixture
    def storage_factory(self, environment_url: str, s3: S3Emulator) -> StorageFactory:
        # Listing pages of 100 keys: the paging test then crosses two page boundaries in 201.
        return SmallPagesFactory(environment_url, s3.options, page=100)


class TestS3SuiteCatchesBrokenStores(BrokenBackendTests):
    """The suite, with the flags above, still fails each deliberately broken store wrapped
    around the S3 backend, naming the promise it breaks."""

    multiprocess = TestS3Emulator.multiprocess
    race_workers = TestS3Emulator.race_workers
    create_rounds = TestS3Emulator.create_rounds
    replace_rounds = TestS3Emulator.replace_rounds
    listing_size = TestS3Emulator.listing_size
    offers = TestS3Emulator.offers
    storage_factory = TestS3Emulator.storage_factory
