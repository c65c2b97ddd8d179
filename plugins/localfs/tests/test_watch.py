"""The local folder tells a watching agent at once that a request was submitted.

Each test runs on both watches: inotify through libc (Linux) and ``watchfiles`` (elsewhere).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdcore_localfs import watch as watch_module
from fdcore_localfs.store import LocalFolderStorage

from fdcore.abc import WatchableStorage


class Watching:
    """A watch of ``requests/`` in a thread, counting its calls."""

    def __init__(self, storage: LocalFolderStorage) -> None:
        self.calls = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=storage.watch, args=("requests/", self._changed, self.stop), daemon=True
        )
        self.thread.start()
        time.sleep(0.3)  # the inotify watch is set up

    def _changed(self) -> None:
        self.calls += 1

    def called_within(self, seconds: float, more_than: int = 0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.calls > more_than:
                return True
            time.sleep(0.005)
        return False


@pytest.fixture(params=["inotify", "watchfiles"])
def storage(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> LocalFolderStorage:
    if request.param == "watchfiles":
        monkeypatch.setattr(watch_module, "_libc", lambda: None)
    elif watch_module._libc() is None:
        pytest.skip("no inotify here")
    return LocalFolderStorage(tmp_path / "env")


@pytest.fixture
def watching(storage: LocalFolderStorage) -> Iterator[Watching]:
    watch = Watching(storage)
    yield watch
    watch.stop.set()
    watch.thread.join(5)
    assert not watch.thread.is_alive(), "the watch did not stop"


def test_the_local_folder_can_be_watched(storage: LocalFolderStorage) -> None:
    assert isinstance(storage, WatchableStorage)


def test_a_request_in_a_new_folder_is_seen(storage: LocalFolderStorage, watching: Watching) -> None:
    assert not (storage.root / "requests").exists()
    storage.create("requests/a.json", b"{}")
    assert watching.called_within(2)


def test_requests_are_seen_as_they_come(storage: LocalFolderStorage, watching: Watching) -> None:
    storage.create("requests/a.json", b"{}")
    assert watching.called_within(2)
    time.sleep(0.3)  # the watch moved to the new folder
    seen = watching.calls
    storage.create("requests/b.json", b"{}")
    assert watching.called_within(1, more_than=seen)


def test_other_folders_are_not_reported(storage: LocalFolderStorage, watching: Watching) -> None:
    storage.create("requests/a.json", b"{}")
    assert watching.called_within(2)
    time.sleep(0.3)
    seen = watching.calls
    storage.create("status/a.json", b"{}")
    storage.create("agents/x.json", b"{}")
    assert not watching.called_within(0.5, more_than=seen)


def test_a_pruned_folder_is_watched_again(storage: LocalFolderStorage, watching: Watching) -> None:
    storage.create("requests/a.json", b"{}")
    assert watching.called_within(2)
    time.sleep(0.3)
    storage.delete("requests/a.json")  # the emptied folder is pruned
    assert not (storage.root / "requests").exists()
    time.sleep(0.3)
    seen = watching.calls
    storage.create("requests/b.json", b"{}")
    assert watching.called_within(2, more_than=seen)


def test_a_replaced_key_is_seen(storage: LocalFolderStorage, watching: Watching) -> None:
    # A lease released or renewed is a replace: an agent waiting for that lease is told.
    etag = storage.create("requests/a.json", b"{}")
    assert watching.called_within(2)
    time.sleep(0.3)
    seen = watching.calls
    storage.replace("requests/a.json", b"{ }", etag)
    assert watching.called_within(2, more_than=seen)


def test_the_watch_logs_nothing_for_a_change(
    storage: LocalFolderStorage, watching: Watching, caplog: pytest.LogCaptureFixture
) -> None:
    # watchfiles logged "1 change detected" at INFO for every submission, in every agent.
    with caplog.at_level(logging.INFO):
        storage.create("requests/a.json", b"{}")
        assert watching.called_within(2)
        time.sleep(0.3)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("watchfiles")] == []


class CountingStop(threading.Event):
    """A stop event that counts how often the watch looks at it: once per wake-up."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        return super().is_set()


def test_an_idle_inotify_watch_sleeps(tmp_path: Path) -> None:
    if watch_module._libc() is None:
        pytest.skip("no inotify here")
    storage = LocalFolderStorage(tmp_path / "env")
    storage.create("requests/a.json", b"{}")
    stop = CountingStop()
    thread = threading.Thread(target=storage.watch, args=("requests/", lambda: None, stop))
    thread.start()
    try:
        time.sleep(2.5)
        checks = stop.checks
    finally:
        stop.set()
        thread.join(5)
    # Once a second to see the stop, not every few milliseconds (watchfiles: about 500).
    assert checks <= 6, checks


def test_the_first_call_says_the_watch_is_armed(storage: LocalFolderStorage) -> None:
    """A caller may look once at the first call and then rely on the calls: a key created
    right after it is reported."""
    if watch_module._libc() is None:
        pytest.skip("watchfiles gives no sign when it is armed: callers settle by time")
    calls: list[float] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=storage.watch, args=("requests/", lambda: calls.append(1), stop), daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.001)
    assert calls, "the watch never said it was armed"
    armed = len(calls)
    storage.create("requests/a.json", b"{}")
    deadline = time.monotonic() + 5
    while len(calls) == armed and time.monotonic() < deadline:
        time.sleep(0.005)
    stop.set()
    thread.join(5)
    assert len(calls) > armed, "a key created right after the watch was armed was not reported"


@pytest.mark.parametrize("removal", ["at_once", "prefix_first"])
def test_a_watch_of_a_removed_environment_sleeps_until_it_is_back(
    storage: LocalFolderStorage, tmp_path: Path, removal: str
) -> None:
    """Removing the environment's folder under a running agent left its inotify watches
    spinning (a stat a few microseconds apart, a core each) and its watchfiles watch raising
    (the agent watched no more); either looks once a second instead, and reports the first
    request once the folder is back.

    ``prefix_first`` is the race a loaded machine gives ``rmtree``: the watch sees
    ``requests/`` go and moves to the environment's folder before that goes too. watchfiles
    then watched the removed folder, waking every 5 ms, for as long as it was gone."""
    storage.create("requests/a.json", b"{}")
    stop = CountingStop()
    calls: list[float] = []
    thread = threading.Thread(
        target=storage.watch, args=("requests/", lambda: calls.append(1), stop), daemon=True
    )
    thread.start()
    try:
        time.sleep(0.3)
        if removal == "prefix_first":
            shutil.rmtree(tmp_path / "env" / "requests")
            time.sleep(0.3)  # the watch moved to the environment's folder
        shutil.rmtree(tmp_path / "env")
        time.sleep(0.3)  # the watch saw its folder go
        checks = stop.checks
        time.sleep(2.5)
        # inotify: once a second; watchfiles checks its stop every few milliseconds while
        # it watches, but none while the folder is gone
        assert stop.checks - checks <= 6, stop.checks - checks
        assert thread.is_alive(), "the watch ended with its folder"
        before = len(calls)
        LocalFolderStorage(tmp_path / "env").create("requests/b.json", b"{}")  # made anew
        deadline = time.monotonic() + 5
        while len(calls) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) > before, "the request in the folder made again was not reported"
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
