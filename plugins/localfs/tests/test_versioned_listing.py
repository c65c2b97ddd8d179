"""The local folder's versioned listing: a read's etag from a stat, a file hashed once per version.

(The promises every store keeps are the conformance probe versioned-listing's, in
test_conformance.py; these are what only the local folder's way of keeping them needs.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fdcore_localfs import LocalFolderStorage
from fdcore_localfs import store as localfs


@pytest.fixture
def store(tmp_path: Path) -> LocalFolderStorage:
    return LocalFolderStorage(tmp_path / "env")


def _hashes(monkeypatch: pytest.MonkeyPatch, store: LocalFolderStorage) -> list[str]:
    """Record each file the listing reads to hash it."""
    hashed: list[str] = []
    real = store._hashed

    def counting(path: str, found: os.stat_result) -> tuple[str, os.stat_result]:
        hashed.append(Path(path).name)
        return real(path, found)

    monkeypatch.setattr(store, "_hashed", counting)
    return hashed


def test_a_settled_version_is_hashed_once_and_a_change_in_place_again(
    store: LocalFolderStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localfs, "SETTLED_NS", 0)  # every version counts as settled at once
    hashed = _hashes(monkeypatch, store)
    store.create("status/a.json", b'{"state": "a"}')
    store.create("status/b.json", b'{"state": "b"}')
    first = {one.key: one.etag for one in store.list_versions("status/")}
    again = {one.key: one.etag for one in store.list_versions("status/")}
    assert hashed == ["a.json", "b.json"]  # the second listing only stat'ed them
    assert first == again == {key: store.read(key).etag for key in first}  # type: ignore[union-attr]

    # Edited in place, same size, the modification time put back: the inode's change time
    # still moved, so the listing hashes it again and gives the read's new etag.
    path = store.root / "status/a.json"
    before = os.stat(path)
    time.sleep(0.05)  # past the file system's clock tick
    path.write_bytes(b'{"state": "A"}')
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    listed = {one.key: one.etag for one in store.list_versions("status/")}
    assert hashed[2:] == ["a.json"]
    assert listed["status/a.json"] == store.read("status/a.json").etag  # type: ignore[union-attr]
    assert listed["status/a.json"] != first["status/a.json"]


def test_a_version_written_just_now_is_hashed_at_every_listing(
    store: LocalFolderStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within two seconds of its write a file's stat may match a later version's on a reused
    inode in the same clock tick: it is not remembered yet (as racy git)."""
    hashed = _hashes(monkeypatch, store)
    store.create("status/a.json", b"1")
    list(store.list_versions("status/"))
    list(store.list_versions("status/"))
    assert hashed == ["a.json", "a.json"]


def test_a_fifo_a_link_and_a_big_file_are_listed_unread(
    store: LocalFolderStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localfs, "LISTED_HASH_BOUND", 10)
    folder = store.root / "requests"
    folder.mkdir()
    os.mkfifo(folder / "fifo.json")  # opening it to hash would block the listing
    (folder / "link.json").symlink_to("/dev/zero")  # reading it would never end
    store.create("requests/big.json", b"x" * 11)
    store.create("requests/small.json", b"x" * 10)
    listed = {one.key: one.etag for one in store.list_versions("requests/")}
    assert list(listed) == list(store.list("requests/"))
    assert all(
        listed[f"requests/{name}"].endswith('-unread"')
        for name in ("fifo.json", "link.json", "big.json")
    )
    assert listed["requests/small.json"] == store.read("requests/small.json").etag  # type: ignore[union-attr]


def test_modified_is_the_mtime_the_write_stamped(store: LocalFolderStorage) -> None:
    store.create("agents/a.json", b"{}")
    written = store.last_write_time()
    (listed,) = store.list_versions("agents/")
    assert listed.modified == written and listed.modified.tzinfo is not None
