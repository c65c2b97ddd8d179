"""Listing a mailbox folder, which every poll does: the memory store's prefix listing, and the
ids a mailbox remembers between listings (each name checked once, bad names still reported)."""

from __future__ import annotations

from fdcore.builtin.memory import MemoryStorage
from fdcore.mailbox.access import Mailbox, ProblemLog


def test_a_prefix_lists_exactly_its_keys_among_neighbours_that_sort_close() -> None:
    store = MemoryStorage.fresh("listing-neighbours")
    keys = ["status/a.json", "status/b.json", "status0/x.json", "statusa.json", "statur/z.json"]
    keys += ["status", "s/t.json", "t/u.json"]
    for key in keys:
        store.create(key, b"{}")
    assert list(store.list("status/")) == ["status/a.json", "status/b.json"]
    assert list(store.list("status")) == [
        "status",
        "status/a.json",
        "status/b.json",
        "status0/x.json",
        "statusa.json",
    ]
    assert list(store.list("")) == sorted(keys)
    assert list(store.list("zzz/")) == []


def test_ids_follow_the_folder_and_bad_names_are_reported_once() -> None:
    store = MemoryStorage.fresh("listing-ids")
    problems = ProblemLog("test")
    mailbox = Mailbox(store, problems)
    store.create("requests/r1.json", b"{}")
    store.create("requests/bad name.json", b"{}")
    store.create("requests/sub/r2.json", b"{}")
    assert list(mailbox.request_ids()) == ["r1"]
    store.create("requests/r0.json", b"{}")
    assert list(mailbox.request_ids()) == ["r0", "r1"]
    assert list(mailbox.request_ids()) == ["r0", "r1"]
    store.delete("requests/r1.json")
    assert list(mailbox.request_ids()) == ["r0"]
    store.create("requests/r1.json", b"{}")  # back again
    assert list(mailbox.request_ids()) == ["r0", "r1"]
    assert problems.reported == [
        "requests/bad name.json: file name is not '<valid id>.json'",
        "requests/sub: is a folder, not a file: not read",
    ]
    for n in range(200):  # many come and go: what is remembered stays about the folder's size
        store.create(f"requests/x{n}.json", b"{}")
        list(mailbox.request_ids())
        store.delete(f"requests/x{n}.json")
    assert list(mailbox.request_ids()) == ["r0", "r1"]
    assert len(mailbox._listed["requests/"]) < 100
