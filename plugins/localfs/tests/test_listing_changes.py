"""The local folder's listing changes (inotify): taken into the last listing, a whole listing.

(The conformance probe listing-changes, in test_conformance.py, holds the promise every store
keeps; these are what only the local folder's way of keeping it needs: writes from other
processes, a folder pruned or nested, a lost queue, and the places where it must list whole.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fdcore_localfs import LocalFolderStorage
from fdcore_localfs import changes as changes_module
from fdcore_localfs import store as localfs
from fdcore_localfs.changes import EVENT, IN_Q_OVERFLOW, FolderChanges

from fdcore.abc import Listed, ListedChanges

PREFIX = "requests/"

# A writer in a process of its own: seeded creates, replaces, deletes, edits in place and
# touches of a few names, so the reader's events come from another process's calls.
WRITER = textwrap.dedent(
    """
    import os, random, sys
    from pathlib import Path
    from fdcore.errors import AlreadyExists, PreconditionFailed
    from fdcore_localfs import LocalFolderStorage
    root, seed = Path(sys.argv[1]), int(sys.argv[2])
    store, rng = LocalFolderStorage(root), random.Random(seed)
    for n in range(40):
        key = f"requests/r{rng.randrange(12):02d}.json"
        what, found = rng.randrange(5), store.read(key)
        if found is None:
            try:
                store.create(key, f"{seed}-{n}".encode())
            except AlreadyExists:
                pass
        elif what == 0:
            store.delete(key)
        elif what == 1:
            store.replace(key, f"{seed}-{n}-again".encode(), found.etag)
        elif what == 2:
            with open(root / key, "r+b") as handle:  # by hand, in place, the same size
                handle.write(b"X")
        elif what == 3:
            os.utime(root / key, ns=(n, n))  # a touch: the modification time moves
    """
)


@pytest.fixture
def changes(monkeypatch: pytest.MonkeyPatch) -> FolderChanges:
    """A process's follower of its own for each test: no test sees another's watches."""
    fresh = FolderChanges()
    monkeypatch.setattr(localfs, "CHANGES", fresh)
    return fresh


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "env"


def _taken_in(listing: dict[str, Listed], answer: ListedChanges) -> dict[str, Listed]:
    if answer.complete:
        return {one.key: one for one in answer.listed}
    merged = dict(listing)
    for key in answer.removed:
        merged.pop(key, None)
    merged.update((one.key, one) for one in answer.listed)
    return merged


def _whole(store: LocalFolderStorage) -> dict[str, Listed]:
    return {one.key: one for one in store.list_versions(PREFIX)}


def test_another_process_s_writes_taken_in_give_the_whole_listing(
    changes: FolderChanges, root: Path
) -> None:
    reader = LocalFolderStorage(root)
    reader.create(f"{PREFIX}first.json", b"{}")  # the folder exists: it can be followed
    first = reader.list_changes(PREFIX)
    assert first.complete
    listing, cursor, followed = _taken_in({}, first), first.cursor, 0
    for seed in range(8):
        subprocess.run([sys.executable, "-c", WRITER, str(root), str(seed)], check=True)
        answer = reader.list_changes(PREFIX, cursor)
        followed += not answer.complete
        listing, cursor = _taken_in(listing, answer), answer.cursor
        assert listing == _whole(reader), f"after writer {seed}"
        for key, one in listing.items():  # each listed etag is what a read returns
            found = reader.read(key)
            assert found is not None and found.etag == one.etag
    assert followed >= 6  # the answers were changes, not whole listings in disguise
    again = reader.list_changes(PREFIX, cursor)
    assert not again.complete and not again.listed and not again.removed


def test_a_pruned_folder_is_listed_whole_then_followed_again(
    changes: FolderChanges, root: Path
) -> None:
    store = LocalFolderStorage(root)
    store.create(f"{PREFIX}a.json", b"1")
    first = store.list_changes(PREFIX)
    store.delete(f"{PREFIX}a.json")  # the folder is pruned with its last key
    assert not (root / "requests").exists()
    gone = store.list_changes(PREFIX, first.cursor)
    assert gone.complete and gone.listed == []
    store.create(f"{PREFIX}b.json", b"2")
    back = store.list_changes(PREFIX, gone.cursor)
    assert back.complete and [one.key for one in back.listed] == [f"{PREFIX}b.json"]
    store.create(f"{PREFIX}c.json", b"3")
    followed = store.list_changes(PREFIX, back.cursor)
    assert not followed.complete and [one.key for one in followed.listed] == [f"{PREFIX}c.json"]


def test_a_folder_that_comes_to_hold_a_folder_is_listed_whole(
    changes: FolderChanges, root: Path
) -> None:
    store = LocalFolderStorage(root)
    store.create(f"{PREFIX}a.json", b"1")
    first = store.list_changes(PREFIX)
    assert first.cursor is not None
    store.create(f"{PREFIX}deeper/b.json", b"2")  # a watch does not see into the new folder
    nested = store.list_changes(PREFIX, first.cursor)
    assert nested.complete
    assert [one.key for one in nested.listed] == [f"{PREFIX}a.json", f"{PREFIX}deeper/b.json"]
    store.create(f"{PREFIX}deeper/c.json", b"3")
    again = store.list_changes(PREFIX, nested.cursor)
    assert again.complete and f"{PREFIX}deeper/c.json" in [one.key for one in again.listed]


def test_a_lost_queue_lists_every_folder_whole(changes: FolderChanges, root: Path) -> None:
    store = LocalFolderStorage(root)
    store.create(f"{PREFIX}a.json", b"1")
    first = store.list_changes(PREFIX)
    changes.take(EVENT.pack(-1, IN_Q_OVERFLOW, 0, 0))  # what the kernel sends when it drops
    store.create(f"{PREFIX}b.json", b"2")
    answer = store.list_changes(PREFIX, first.cursor)
    assert answer.complete and len(answer.listed) == 2


@pytest.mark.parametrize(
    "why",
    ["a network file system", "no inotify instance", "an old cursor", "a prefix of names"],
)
def test_where_the_watch_cannot_tell_every_answer_is_the_whole_listing(
    changes: FolderChanges, root: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    prefix = PREFIX
    if why == "a network file system":
        monkeypatch.setattr(changes_module, "_file_system_type", lambda folder: 0x6969)  # NFS
    elif why == "no inotify instance":
        monkeypatch.setattr(changes, "_instance", lambda: None)
    elif why == "an old cursor":
        monkeypatch.setattr(changes_module, "RELIST_SECONDS", 0.0)
    else:
        prefix = f"{PREFIX}r"
    store = LocalFolderStorage(root)
    store.create(f"{PREFIX}r1.json", b"1")
    cursor = None
    for n in range(2, 5):
        answer = store.list_changes(prefix, cursor)
        assert answer.complete
        assert [one.key for one in answer.listed] == [f"{PREFIX}r{k}.json" for k in range(1, n)]
        cursor = answer.cursor
        store.create(f"{PREFIX}r{n}.json", b"1")


def test_a_cursor_of_another_folder_lists_whole(changes: FolderChanges, root: Path) -> None:
    store = LocalFolderStorage(root)
    store.create(f"{PREFIX}a.json", b"1")
    store.create("status/a.json", b"1")
    other = store.list_changes("status/")
    assert store.list_changes(PREFIX, other.cursor).complete


def test_a_forked_child_follows_on_its_own(changes: FolderChanges, root: Path) -> None:
    """A child that lists must not read the parent's queue: the parent would miss its events."""
    store = LocalFolderStorage(root)
    store.create(f"{PREFIX}a.json", b"1")
    first = store.list_changes(PREFIX)
    store.create(f"{PREFIX}b.json", b"2")
    pid = os.fork()
    if pid == 0:  # the child lists, from the parent's cursor, then exits at once
        answer = LocalFolderStorage(root).list_changes(PREFIX, first.cursor)
        os._exit(0 if answer.complete else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    answer = store.list_changes(PREFIX, first.cursor)
    assert not answer.complete and [one.key for one in answer.listed] == [f"{PREFIX}b.json"]


def test_a_closed_store_lets_its_folders_go(changes: FolderChanges, root: Path) -> None:
    store, other = LocalFolderStorage(root), LocalFolderStorage(root)
    store.create(f"{PREFIX}a.json", b"1")
    first = other.list_changes(PREFIX)
    assert changes._by_path
    store.close()
    assert not changes._by_path  # no watch left behind
    store.create(f"{PREFIX}b.json", b"2")
    again = other.list_changes(PREFIX, first.cursor)  # the other store lists whole, then follows
    assert again.complete and len(again.listed) == 2
    store.create(f"{PREFIX}c.json", b"3")
    assert not other.list_changes(PREFIX, again.cursor).complete


def test_past_the_bound_of_folders_followed_the_rest_list_whole(
    changes: FolderChanges, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes_module, "FOLLOWED_BOUND", 2)
    stores = [LocalFolderStorage(tmp_path / f"env{n}") for n in range(3)]
    for store in stores:
        store.create(f"{PREFIX}a.json", b"1")
    cursors = [store.list_changes(PREFIX).cursor for store in stores]
    assert [cursor is not None for cursor in cursors] == [True, True, False]
    stores[0].delete(f"{PREFIX}a.json")  # its folder goes: its watch ends, room for another
    stores[0].list_changes(PREFIX, cursors[0])
    assert stores[2].list_changes(PREFIX).cursor is not None


def test_a_listing_of_changes_looks_at_what_changed_not_at_every_file(
    changes: FolderChanges, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an agent's look costs: with 500 queued requests, one new request is one file looked
    at (a stat, and a hash of the new file), not 500."""
    store = LocalFolderStorage(root)
    for n in range(500):
        store.create(f"{PREFIX}r{n:04d}.json", b"{}")
    looked: list[str] = []
    real = store._version

    def counting(key: str, path: str, found: os.stat_result) -> Listed:
        looked.append(key)
        return real(key, path, found)

    monkeypatch.setattr(store, "_version", counting)
    first = store.list_changes(PREFIX)
    assert len(looked) == 500
    looked.clear()
    store.create(f"{PREFIX}r0500.json", b"{}")
    answer = store.list_changes(PREFIX, first.cursor)
    assert not answer.complete and looked == [f"{PREFIX}r0500.json"]
