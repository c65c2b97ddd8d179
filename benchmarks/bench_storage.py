"""Storage operations side by side: the local folder, OneLake's backend against Azurite, and
the S3 backend against moto's S3 server (fdcore_s3.testing).

    .venv/bin/pytest benchmarks/bench_storage.py --benchmark-only \
        --benchmark-columns=median,iqr,ops --benchmark-group-by=group

Each group (create, replace, read, list-100) holds one row per store, so the table reads as a
comparison; list-100 holds a second row per store, ``list_versions`` (the versioned listing),
beside ``list``. Both emulators run on this machine: their figures are the cost of the HTTP stack,
the SDK and the emulator, not of a network; a tenant adds its round trip (tens of
milliseconds) to each operation. Results are written down in docs/benchmarks.md.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdcore_localfs import LocalFolderStorage
from fdcore_onelake import open_storage
from fdcore_onelake.testing import Azurite
from fdcore_s3 import S3Storage, parse_location
from fdcore_s3.testing import S3Emulator, credentials_environment
from pytest_benchmark.fixture import BenchmarkFixture

from fdcore.abc import Storage, VersionedListing

pytestmark = pytest.mark.processes  # Azurite and moto's S3 server

CONTAINER = "fdcore-bench"
PAYLOAD = b'{"state": "running", "agent": "agent-1", "attempt": 1, "attempts": []}' * 4  # ~300 B


@pytest.fixture(scope="module")
def azurite() -> Iterator[Azurite]:
    with Azurite() as emulator:
        emulator.create_container(CONTAINER)
        yield emulator


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Emulator]:
    with S3Emulator() as emulator:
        emulator.create_bucket(CONTAINER)
        yield emulator


@pytest.fixture(params=["localfs", "azurite", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Storage]:
    opened: Storage
    folder = f"env-{uuid.uuid4().hex[:12]}"
    if request.param == "localfs":
        opened = LocalFolderStorage(tmp_path / "env")
    elif request.param == "azurite":
        emulator: Azurite = request.getfixturevalue("azurite")
        opened = open_storage(emulator.url(CONTAINER, folder))
    else:
        s3: S3Emulator = request.getfixturevalue("s3")
        for name, value in credentials_environment().items():
            monkeypatch.setenv(name, value)
        opened = S3Storage(parse_location(s3.url(CONTAINER, folder), s3.options))
    yield opened
    opened.close()


@pytest.mark.benchmark(group="create")
def test_create(benchmark: BenchmarkFixture, store: Storage) -> None:
    names = (f"status/r-{n}.json" for n in itertools.count())
    benchmark(lambda: store.create(next(names), PAYLOAD))


@pytest.mark.benchmark(group="replace")
def test_replace(benchmark: BenchmarkFixture, store: Storage) -> None:
    etag = [store.create("status/r-1.json", PAYLOAD)]

    def replace() -> None:
        etag[0] = store.replace("status/r-1.json", PAYLOAD, etag[0])

    benchmark(replace)


@pytest.mark.benchmark(group="read")
def test_read(benchmark: BenchmarkFixture, store: Storage) -> None:
    store.create("status/r-1.json", PAYLOAD)
    blob = benchmark(lambda: store.read("status/r-1.json"))
    assert blob is not None and blob.data == PAYLOAD


@pytest.mark.benchmark(group="list-100")
def test_list_100(benchmark: BenchmarkFixture, store: Storage) -> None:
    for n in range(100):
        store.create(f"requests/r-{n:03d}.json", PAYLOAD)
    store.create("status/other.json", PAYLOAD)  # outside the prefix: must not be listed
    keys = benchmark(lambda: list(store.list("requests/")))
    assert len(keys) == 100


@pytest.mark.benchmark(group="list-100")
def test_list_versions_100(benchmark: BenchmarkFixture, store: Storage) -> None:
    assert isinstance(store, VersionedListing)
    etags = {}
    for n in range(100):
        etags[f"requests/r-{n:03d}.json"] = store.create(f"requests/r-{n:03d}.json", PAYLOAD)
    store.create("status/other.json", PAYLOAD)  # outside the prefix: must not be listed
    if isinstance(store, LocalFolderStorage):
        # A local folder's listing remembers a file's hash once its times are 2 s old: measure
        # the steady state, where a reader lists again and little has changed.
        time.sleep(2.1)
    listed = benchmark(lambda: list(store.list_versions("requests/")))
    assert {one.key: one.etag for one in listed} == etags
