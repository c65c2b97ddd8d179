"""The storage conformance suite (fdcore.testing), run against the S3 emulator."""

from __future__ import annotations

import pytest
from fdcore_s3.testing import S3Emulator

from fdcore.testing.storage_suite import StorageFactory, StorageSuite, UrlStorageFactory


class TestS3Emulator(StorageSuite):
    multiprocess = True
    # One emulator serving one request at a time on 2 cores: fewer racers and rounds than the
    # defaults, every race still in real processes. Pages are proven with a small page size in
    # test_s3_store.py.
    race_workers = 4
    create_rounds = 25
    replace_rounds = 15
    listing_size = 1_000

    @pytest.fixture
    def storage_factory(self, environment_url: str, s3: S3Emulator) -> StorageFactory:
        return UrlStorageFactory(environment_url, s3.options)
