"""Backend behaviour against a real Azurite: plugin loading, listing pages, shared clients,
directory entries, outages (Azurite stopped and restarted mid-run) and lost answers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient
from fdcore_onelake import testing
from fdcore_onelake.credentials import EMULATOR_ACCOUNT, EMULATOR_KEY
from fdcore_onelake.store import FOLDER_MARK, OneLakeStorage, open_storage
from fdcore_onelake.testing import Azurite, AzuriteMissing
from fdcore_onelake.urls import parse_location

from fdcore.abc import Blob, ChangeCheck, StoreClock
from fdcore.errors import StorageUnavailable, UnreadableFile
from fdcore.plugins.manager import load_plugins
from fdcore.retry import RetryPolicy

pytestmark = pytest.mark.processes

CONTAINER = "fdcore-outage"  # in the test's own Azurite instances
QUICK_FAIL = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)


def test_missing_azurite_fails_saying_run_make_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(testing, "BINARY", Path("tools/azurite/node_modules/.bin/not-installed"))
    with pytest.raises(AzuriteMissing, match=r"not-installed not found .*: run `make setup`"):
        Azurite()
    monkeypatch.setenv("FDCORE_AZURITE", str(tmp_path / "azurite-blob"))
    with pytest.raises(AzuriteMissing, match="is not an executable"):
        Azurite()


def test_plugin_serves_azurite_urls(environment_url: str) -> None:
    plugins = load_plugins()
    assert plugins.storage_backend(environment_url).name == "onelake"
    store = plugins.open_storage(environment_url)
    try:
        assert isinstance(store, OneLakeStorage)
        assert store.url == environment_url
    finally:
        store.close()


def test_listing_follows_pages_and_stays_in_its_folder(azurite: Azurite, container: str) -> None:
    # Two environments whose folders share a name prefix ("env-1" and "env-10").
    base = f"pages-{id(azurite):x}"
    store = open_storage(azurite.url(container, f"{base}/env-1"), list_page_size=7)
    sibling = open_storage(azurite.url(container, f"{base}/env-10"))
    try:
        keys = [f"requests/r-{n:03d}.json" for n in range(40)] + ["agents/a.json", "z"]
        for key in keys:
            store.create(key, b"x")
        sibling.create("requests/r-999.json", b"y")
        assert list(store.list()) == sorted(keys)  # 6 pages of 7
        assert list(store.list("requests/r-01")) == [
            f"requests/r-{n:03d}.json" for n in range(10, 20)
        ]
        assert list(store.list("agents/")) == ["agents/a.json"]
        assert list(store.list("nothing/")) == []
        assert list(sibling.list()) == ["requests/r-999.json"]
    finally:
        store.close()
        sibling.close()


def test_directory_entries_of_a_hierarchical_namespace_are_not_keys(
    azurite: Azurite, container: str, environment_url: str
) -> None:
    # On OneLake and ADLS Gen2 a flat blob listing shows each directory as an empty blob marked
    # hdi_isfolder=true. Azurite has no namespace, so write such a marker by hand.
    location = parse_location(environment_url)
    credential = {"account_name": EMULATOR_ACCOUNT, "account_key": EMULATOR_KEY}
    with BlobServiceClient(azurite.endpoint, credential=credential) as service:
        blob = service.get_blob_client(container, location.blob_name("requests"))
        blob.upload_blob(b"", metadata={FOLDER_MARK: "true"})
    store = open_storage(environment_url)
    try:
        store.create("requests/r-1.json", b"{}")
        assert list(store.list()) == ["requests/r-1.json"]
        assert store.read("requests") is None
    finally:
        store.close()


def test_stores_share_one_client_per_account_and_credential(
    azurite: Azurite, container: str, environment_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_storage(environment_url)
    second = open_storage(azurite.url(container, "elsewhere"))
    monkeypatch.setenv("FDCORE_TEST_CONN", azurite.connection_string)
    third = open_storage(environment_url, {"connection_string_env": "FDCORE_TEST_CONN"})
    try:
        assert first._service is second._service  # same account, same key
        assert third._service is second._service  # same key, given another way
        first.close()
        second.create("still-open.json", b"x")  # closing one store leaves the client to others
    finally:
        second.delete("still-open.json")
        for store in (first, second, third):
            store.close()
    other_key = {"account_key_env": "FDCORE_TEST_KEY"}
    monkeypatch.setenv("FDCORE_TEST_KEY", "b3RoZXIta2V5")
    fourth, fifth = open_storage(environment_url), open_storage(environment_url, other_key)
    try:
        assert fourth._service is not fifth._service
        assert fourth._service is not first._service  # the last close released the old one
    finally:
        fourth.close()
        fifth.close()


@pytest.fixture
def disk_azurite(tmp_path: Path) -> Iterator[Azurite]:
    """An Azurite of its own, keeping data on disk so it survives a restart."""
    with Azurite(location=tmp_path / "azurite") as emulator:
        emulator.create_container(CONTAINER)
        yield emulator


@pytest.mark.slow
def test_outage_raises_unavailable_then_recovers_after_restart(disk_azurite: Azurite) -> None:
    url = disk_azurite.url(CONTAINER, "outage")
    store = open_storage(url, retry=QUICK_FAIL)
    try:
        etag = store.create("status/r-1.json", b"accepted")
        disk_azurite.stop()
        operations = {
            "read": lambda: store.read("status/r-1.json"),
            "create": lambda: store.create("status/r-2.json", b"x"),
            "replace": lambda: store.replace("status/r-1.json", b"running", etag),
            "delete": lambda: store.delete("status/r-1.json", etag),
            "list": lambda: store.list("status/"),
        }
        for name, operation in operations.items():
            with pytest.raises(StorageUnavailable, match="failed 3 times") as raised:
                operation()
            assert name in str(raised.value)
        disk_azurite.start()  # same port: the open store reconnects by itself
        assert store.read("status/r-1.json") == Blob(b"accepted", etag)  # kept on disk
        new = store.replace("status/r-1.json", b"running", etag)
        assert list(store.list("status/")) == ["status/r-1.json"]
        assert store.read("status/r-1.json") == Blob(b"running", new)
    finally:
        store.close()


@pytest.mark.slow
def test_write_during_a_restart_lands_once_back(disk_azurite: Azurite) -> None:
    patient = RetryPolicy(attempts=120, base_delay=0.05, max_delay=0.25)  # ~30 s window
    store = open_storage(disk_azurite.url(CONTAINER, "restart"), retry=patient)
    try:
        disk_azurite.stop()
        restart = threading.Timer(0.5, disk_azurite.start)
        restart.start()
        etag = store.create("requests/r-1.json", b"{}")  # retried until Azurite is back
        restart.join()
        assert store.read("requests/r-1.json") == Blob(b"{}", etag)
    finally:
        store.close()


@pytest.mark.slow
def test_in_memory_azurite_loses_data_on_restart() -> None:
    # Why the outage tests above use a disk location: an in-memory Azurite starts empty again.
    with Azurite() as emulator:
        emulator.create_container(CONTAINER)
        store = open_storage(emulator.url(CONTAINER, "gone"), retry=QUICK_FAIL)
        try:
            store.create("k", b"v")
            emulator.restart()
            with pytest.raises(StorageUnavailable, match="does not exist"):
                store.read("k")  # the container itself is gone: never read as an empty mailbox
        finally:
            store.close()


class AnswerDroppingProxy:
    """A TCP proxy in front of Azurite that can swallow the next answer.

    The request reaches Azurite and takes effect; the client sees its connection cut, exactly as
    when a network drops a response. Each client connection gets its own upstream connection.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.drop_next_answer = threading.Event()
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and self.drop_next_answer.is_set():
                    self.drop_next_answer.clear()
                    self.dropped += 1
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()


def test_retried_writes_whose_answers_were_lost_report_their_own_success(
    azurite: Azurite, container: str, environment_url: str
) -> None:
    proxy = AnswerDroppingProxy(azurite.port)
    folder = environment_url.split(f"/{container}/", 1)[1]
    through_proxy = f"http://127.0.0.1:{proxy.port}/{EMULATOR_ACCOUNT}/{container}/{folder}"
    store = open_storage(through_proxy, retry=QUICK_FAIL)
    direct = open_storage(environment_url)
    try:
        proxy.drop_next_answer.set()
        etag = store.create("status/r-1.json", b"claimed by me")  # landed, answer lost, retried
        assert proxy.dropped == 1
        assert direct.read("status/r-1.json") == Blob(b"claimed by me", etag)

        proxy.drop_next_answer.set()
        new = store.replace("status/r-1.json", b"running", etag)
        assert proxy.dropped == 2
        assert direct.read("status/r-1.json") == Blob(b"running", new)

        proxy.drop_next_answer.set()
        store.delete("status/r-1.json", new)
        assert proxy.dropped == 3
        assert direct.read("status/r-1.json") is None
    finally:
        store.close()
        direct.close()
        proxy.close()


def test_a_bounded_read_downloads_no_more_than_the_bound(azurite: Azurite, container: str) -> None:
    """A mailbox read (``read_bounded``) of a 3 MiB blob stops at the bound and says so; small
    and empty blobs read whole."""
    store = open_storage(azurite.url(container, f"bounded-{id(azurite):x}"))
    try:
        store.create("requests/big.json", b"x" * (3 << 20))
        store.create("requests/small.json", b'{"a": 1}')
        store.create("requests/empty.json", b"")
        with pytest.raises(UnreadableFile, match=r"is 3145728 bytes, over the bound of 1048576"):
            store.read_bounded("requests/big.json", 1 << 20)
        small = store.read_bounded("requests/small.json", 1 << 20)
        assert small is not None and small.data == b'{"a": 1}'
        assert small.etag == store.read("requests/small.json").etag  # type: ignore[union-attr]
        empty = store.read_bounded("requests/empty.json", 1 << 20)
        assert empty is not None and empty.data == b""
        assert store.read_bounded("requests/none.json", 1 << 20) is None
        exact = b"y" * 10
        store.create("requests/exact.json", exact)
        assert store.read_bounded("requests/exact.json", 10).data == exact  # type: ignore[union-attr]
    finally:
        store.close()


def test_the_store_reports_its_write_time_and_unchanged_blobs(
    azurite: Azurite, container: str
) -> None:
    """StoreClock: each write's ``Last-Modified`` (whole seconds), so agents on OneLake measure
    their clock skew; ChangeCheck: a HEAD tells whether a blob still has the etag read."""
    store = open_storage(azurite.url(container, f"clock-{id(azurite):x}"))
    try:
        assert isinstance(store, StoreClock) and isinstance(store, ChangeCheck)
        assert store.last_write_time() is None
        before = datetime.now(timezone.utc)
        etag = store.create("agents/a.json", b"{}")
        stamped = store.last_write_time()
        assert stamped is not None
        # Azurite runs on this machine's clock: within a second (the stamp's resolution).
        assert abs((stamped - before).total_seconds()) <= 1.0 + 0.5
        assert store.unchanged("agents/a.json", etag)
        store.replace("agents/a.json", b'{"b": 1}', etag)
        assert not store.unchanged("agents/a.json", etag)
        assert not store.unchanged("agents/none.json", etag)
    finally:
        store.close()
