"""The listing probes: prefixes, pages, sizes, key names, versions and what changed."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import partial

from fdcore.abc import (
    Blob,
    BoundedRead,
    ChangeCheck,
    Listed,
    ListingChanges,
    Storage,
    StoreClock,
    VersionedListing,
    WatchableStorage,
    read_mailbox_file,
)
from fdcore.conformance.framework import (
    ProbeContext,
    Violation,
    expect,
    expect_raises,
    opened,
    registered,
    show_blob,
)
from fdcore.errors import InvalidKey, UnreadableFile


def for_each_key(
    ctx: ProbeContext, keys: Iterable[str], action: Callable[[Storage, str], object]
) -> None:
    """Run ``action(store, key)`` for many keys on a pool of handles: remote stores are latency
    bound, so ``ctx.threads`` requests in flight make thousands of keys take seconds."""
    local = threading.local()
    handles: list[Storage] = []
    lock = threading.Lock()

    def run(key: str) -> None:
        store = getattr(local, "store", None)
        if store is None:
            store = local.store = ctx.factory()
            with lock:
                handles.append(store)
        action(store, key)

    try:
        with ThreadPoolExecutor(max(ctx.threads, 1)) as pool:
            for _ in pool.map(run, keys):
                pass
    finally:
        for store in handles:
            store.close()


@registered("list-by-prefix")
def probe_list_by_prefix(ctx: ProbeContext) -> str:
    base = ctx.key("list/")
    bulk = {f"{base}bulk/{n % 16:x}/{n:06d}.json": b"%d" % n for n in range(ctx.listing_size)}
    for_each_key(ctx, bulk, lambda store, key: store.create(key, bulk[key]))
    with opened(ctx) as store:
        listed = list(store.list(f"{base}bulk/"))
        expect(len(listed) == len(bulk), f"list gave {len(listed)} of {len(bulk)} keys")
        expect(listed == sorted(bulk), "list did not give every key once, in sorted order")
        third = [key for key in sorted(bulk) if key.startswith(f"{base}bulk/3/")]
        listed = list(store.list(f"{base}bulk/3"))
        expect(listed == third, f"list of bulk/3 gave {len(listed)} keys, expected {len(third)}")
        everything = list(store.list(base))
        expect(everything == sorted(bulk), "list of the whole probe folder differed")
    return f"{len(bulk)} keys listed once each in order, and by a prefix within them"


#: Keys beside each other that a listing by folder, by ``LIKE`` (case-insensitive, ``_`` and
#: ``%`` wildcards), by glob (``*``, ``?``, ``[``), by regular expression (``.``) or after a
#: Unicode folding would confuse. None is a folder of another, so a file system can hold them.
EXACT_PREFIX_KEYS = (
    "a/b.json",
    "a/b.json.bak",
    "a/b/y",
    "a/bc/x",
    "a/c",
    "a-b",
    "ab",
    "aXb",
    "axb",
    "A/B.json",
    "A/b/y",
    "a%b/x",
    "a_",
    "a_b",
    "a*",
    "a*b",
    "a?",
    "a[b]",
    "a.b",
    "\u00e9/x",  # é, composed (NFC)
    "e\u0301/y",  # é, decomposed (NFD)
    "E/z",
    "stra\u00dfe/x",  # straße
    "strasse/x",
    "\uff5e",  # fullwidth tilde: before U+1F642 by code point and UTF-8, after it in UTF-16
    "\U0001f642",  # 🙂
)
#: Prefixes listed; what each must give is every key above that starts with it, in order.
EXACT_PREFIXES = (
    "",
    "a",
    "a/",
    "a/b",
    "a/b/",
    "a/b.json",
    "a/bc/x",
    "a/d",
    "A/",
    "a_",
    "a%",
    "a*",
    "a?",
    "a[",
    "a.",
    "ax",
    "\u00e9",
    "e",
    "E",
    "stra\u00dfe",
    "strasse",
)


def _diff(listed: list[str], expected: list[str]) -> str:
    extra = [key for key in listed if key not in expected]
    missing = [key for key in expected if key not in listed]
    if extra or missing:
        return (f"; also gave {extra}" if extra else "") + (
            f"; left out {missing}" if missing else ""
        )
    return "; same keys, other order or repeated"


@registered("exact-prefix")
def probe_exact_prefix(ctx: ProbeContext) -> str:
    base = ctx.key("exact/")
    with opened(ctx) as store, opened(ctx) as other:
        for key in EXACT_PREFIX_KEYS:
            store.create(base + key, key.encode())
        for prefix in EXACT_PREFIXES:
            expected = sorted(key for key in EXACT_PREFIX_KEYS if key.startswith(prefix))
            listed = [key.removeprefix(base) for key in other.list(base + prefix)]
            expect(
                listed == expected,
                f"list of prefix {prefix!r} gave {listed}, expected {expected}"
                f"{_diff(listed, expected)} (a prefix is matched exactly: no folders, case "
                "folding or wildcards; keys sorted by code point)",
            )
    return (
        f"{len(EXACT_PREFIXES)} prefixes (case, _ % * ? [ ., non-ASCII, whole keys) over "
        f"{len(EXACT_PREFIX_KEYS)} keys each matched exactly, in code point order"
    )


DEFAULT_LIST_PAGE = 1000  # an S3 listing's page; Azure's is 5000


@registered("list-paging")
def probe_list_paging(ctx: ProbeContext) -> str:
    with opened(ctx) as store:
        page = ctx.list_page_size or getattr(store, "list_page_size", None) or DEFAULT_LIST_PAGE
    base = ctx.key("paging/")
    inside = [f"{base}in/{n:06d}" for n in range(2 * page + 1)]
    # beside the prefix on both sides: a listing that pages past its end would show them
    beside = [f"{base}im/x", f"{base}in.x", f"{base}in0", f"{base}io/x"]
    for_each_key(ctx, [*inside, *beside], lambda store, key: store.create(key, b"p"))
    also = ""
    with opened(ctx) as store:
        _check_pages("list", list(store.list(f"{base}in/")), inside, page)
        if isinstance(store, VersionedListing):
            versions = [one.key for one in store.list_versions(f"{base}in/")]
            _check_pages("list_versions", versions, inside, page)
            also = " (and by list_versions)"
    return (
        f"{len(inside)} keys listed over 3 pages of {page}{also}, and none from beside the prefix"
    )


def _check_pages(how: str, listed: list[str], inside: list[str], page: int) -> None:
    expect(
        len(listed) == len(inside),
        f"{how} gave {len(listed)} of {len(inside)} keys (pages of {page}): a listing must "
        "follow every page of the store's listing",
    )
    expect(
        listed == inside,
        f"{how} over {len(inside) // page + 1} pages of {page} gave the "
        "keys out of order, repeated or from outside the prefix",
    )


#: Pairs of keys that differ only by case or Unicode form: different keys, never one.
DISTINCT_KEYS = (
    ("case/Key.json", "case/key.json"),
    ("case/KEY.json", "case/key.json"),
    ("nf/\u00e9.json", "nf/e\u0301.json"),  # é composed (NFC) and decomposed (NFD)
    ("nf/\u212b", "nf/\u00c5"),  # Angstrom sign and Å (NFC makes the first the second)
    ("nf/stra\u00dfe", "nf/strasse"),  # ß and ss (case folding makes them equal)
    ("nf/\ufb01le", "nf/file"),  # the ﬁ ligature and fi (NFKC makes them equal)
)


@registered("distinct-keys")
def probe_distinct_keys(ctx: ProbeContext) -> str:
    base = ctx.key("distinct/")
    keys = sorted({base + key for pair in DISTINCT_KEYS for key in pair})
    with opened(ctx) as store, opened(ctx) as other:
        etags: dict[str, str] = {}
        for pair in DISTINCT_KEYS:
            for key, twin in (pair, pair[::-1]):
                if base + key in etags:
                    continue
                try:
                    etags[base + key] = store.create(base + key, (base + key).encode())
                except Exception as exc:
                    raise Violation(
                        f"create of {key!a} beside {twin!a} raised {type(exc).__name__}: "
                        f"{exc}; keys that differ only by case or Unicode form are different keys"
                    ) from None
        for key in keys:
            blob = other.read(key)
            expect(
                blob == Blob(key.encode(), etags[key]),
                f"{key!r} read back as {show_blob(blob)}: a key that differs from another only by "
                "case or Unicode form must keep its own value",
            )
        listed = list(other.list(base))
        expect(listed == keys, f"list gave {listed}, expected {keys}")
        store.delete(keys[0], etags[keys[0]])
        rest = list(other.list(base))
        expect(rest == keys[1:], f"deleting {keys[0]!r} left {rest}, expected {keys[1:]}")
    return (
        f"{len(keys)} keys differing only by case, NFC/NFD form, ß/ss or a ligature were kept "
        "apart: each created, read, listed and deleted on its own"
    )


@registered("size-bound")
def probe_size_bound(ctx: ProbeContext) -> str:
    """A value of exactly the bound is read whole; with a bounded read, one byte more is
    refused, never returned or cut short."""
    bound = ctx.max_payload
    at, over = ctx.key("bound/at.bin"), ctx.key("bound/over.bin")
    with opened(ctx) as store:
        data = random.Random(bound).randbytes(bound)
        etag = store.create(at, data)
        blob = read_mailbox_file(store, at, bound)
        expect(
            blob == Blob(data, etag),
            f"a mailbox read of a value of exactly {bound} bytes (the bound) gave "
            + ("nothing" if blob is None else f"{len(blob.data)} bytes"),
        )
        if not isinstance(store, BoundedRead):
            return f"a {bound}-byte value read whole; no bounded read (the codec checks sizes)"
        store.create(over, data + b"!")
        for key, limit, what in (
            (over, bound, f"{bound + 1}-byte"),
            (at, bound - 1, f"{bound}-byte"),
        ):
            expect_raises(
                UnreadableFile,
                partial(store.read_bounded, key, limit),
                f"read_bounded({limit}) of a {what} value",
            )
        blob = store.read_bounded(at, bound + 1)
        expect(blob == Blob(data, etag), f"read_bounded under its bound gave {show_blob(blob)}")
    return f"a {bound}-byte value read whole at its bound; one byte more refused (UnreadableFile)"


@registered("large-payload")
def probe_large_payload(ctx: ProbeContext) -> str:
    key = ctx.key("large/value.bin")
    sizes = [0, 1, 65537, ctx.max_payload]
    with opened(ctx) as store, opened(ctx) as other:
        etag = None
        for size in sizes:
            data = random.Random(size).randbytes(size)
            etag = store.create(key, data) if etag is None else store.replace(key, data, etag)
            blob = other.read(key)
            expect(blob is not None, f"{size}-byte value read back as absent")
            assert blob is not None
            expect(
                blob.data == data,
                f"{size}-byte value read back as {len(blob.data)} bytes"
                + ("" if len(blob.data) != size else " with different content"),
            )
            expect(blob.etag == etag, f"{size}-byte value read back with another etag")
    return f"values of {', '.join(map(str, sizes))} bytes round-tripped"


#: Legal keys that trip naive URL building or path handling.
UNUSUAL_NAMES = (
    "with space.json",
    "ünïcødé/日本語/🙂.json",
    "a=b+c@d,e~f.json",
    "percent%20literal.json",
    "hash#and?query.json",
    "semi;colon&and$dollar!(x)[y]'q'.json",
    "trailing.dot.",
    "-leading-dash",
    "/".join(f"level{n}" for n in range(24)) + "/leaf.json",
)


@registered("unusual-keys")
def probe_unusual_keys(ctx: ProbeContext) -> str:
    base = ctx.key("keys/")
    keys = [base + name for name in UNUSUAL_NAMES]
    with opened(ctx) as store, opened(ctx) as other:
        etags = {key: store.create(key, key.encode()) for key in keys}
        for key in keys:
            blob = other.read(key)
            expect(
                blob == Blob(key.encode(), etags[key]), f"{key!r} read back as {show_blob(blob)}"
            )
        listed = list(other.list(base))
        expect(listed == sorted(keys), f"list gave {listed}, expected {sorted(keys)}")
        for key in keys:
            expect(list(other.list(key)) == [key], f"list of prefix {key!r} did not give it")
            store.replace(key, b"replaced", etags[key])
            store.delete(key)
            expect(other.read(key) is None, f"{key!r} still readable after delete")
    return (
        f"{len(keys)} keys (spaces, unicode, =+@,~%#?, 25 levels deep) created, listed, "
        "replaced, deleted"
    )


def invalid_keys(token: str) -> list[str]:
    """Keys every backend must refuse; names carry ``token`` so a broken backend harms nothing."""
    return [
        "",
        f"../{token}",
        f"{token}/../../{token}",
        f".{token}",
        f"{token}/.hidden",
        f"./{token}",
        f"/{token}",
        f"{token}//x",
        f"{token}/",
        f"{token}\\x",
        f"{token}\x00x",
        f"{token}\nx",
        f"{token}\x7f",
        "x" * 1025,
    ]


def _listed(store: Storage, prefix: str) -> list[str]:
    return list(store.list(prefix))


@registered("invalid-keys")
def probe_invalid_keys(ctx: ProbeContext) -> str:
    keys = invalid_keys(f"fdcore-probe-{ctx.token}")
    with opened(ctx) as store:
        for key in keys:
            expect_raises(InvalidKey, partial(store.read, key), f"read({key!r})")
            expect_raises(InvalidKey, partial(store.create, key, b"x"), f"create({key!r})")
            expect_raises(InvalidKey, partial(store.replace, key, b"x", '"e"'), f"replace({key!r})")
            expect_raises(InvalidKey, partial(store.delete, key), f"delete({key!r})")
        for prefix in (f"../{ctx.token}", f".{ctx.token}", f"{ctx.token}\\x", f"/{ctx.token}"):
            expect_raises(InvalidKey, partial(_listed, store, prefix), f"list({prefix!r})")
    return (
        f"{len(keys)} illegal keys (.., dot segments, empty, backslash, control) raised InvalidKey"
    )


#: The optional protocols a store may offer, by name (``ProbeContext.offers``).
OPTIONAL_PROTOCOLS: dict[str, type] = {
    "BoundedRead": BoundedRead,
    "ChangeCheck": ChangeCheck,
    "ListingChanges": ListingChanges,
    "StoreClock": StoreClock,
    "VersionedListing": VersionedListing,
    "WatchableStorage": WatchableStorage,
}


@registered("optional-protocols")
def probe_optional_protocols(ctx: ProbeContext) -> str:
    """What a store offers beyond Storage keeps its word: a change check never calls a changed
    or deleted key unchanged, a store clock gives an aware time for each write. (A bounded
    read's bound is probed by size-bound.)"""
    unknown = sorted(set(ctx.offers) - set(OPTIONAL_PROTOCOLS))
    expect(not unknown, f"offers names {unknown}, not among {sorted(OPTIONAL_PROTOCOLS)}")
    key = ctx.key("optional/value.json")
    with opened(ctx) as store:
        offered = [name for name, kind in OPTIONAL_PROTOCOLS.items() if isinstance(store, kind)]
        missing = [name for name in ctx.offers if name not in offered]
        expect(not missing, f"a store declared to offer {missing} does not (it has {offered})")
        etag = store.create(key, b"x" * 100)
        if isinstance(store, StoreClock):
            stamped = store.last_write_time()
            expect(
                stamped is not None and stamped.tzinfo is not None,
                f"last_write_time() after a create gave {stamped!r}, expected an aware time",
            )
        if isinstance(store, ChangeCheck):
            expect(store.unchanged(key, etag), f"unchanged({key!r}, its own etag) was False")
            newer = store.replace(key, b"y", etag)
            expect(not store.unchanged(key, etag), "a replaced key was called unchanged")
            store.delete(key)
            expect(not store.unchanged(key, newer), "a deleted key was called unchanged")
        else:
            store.delete(key)
    return f"offers {', '.join(offered)}" if offered else "offers no optional protocol"


@registered("versioned-listing")
def probe_versioned_listing(ctx: ProbeContext) -> str:
    """A listing with versions (:class:`VersionedListing`) lists the keys ``list`` does, each
    with the etag a read returns (a new one after a replace, and after delete and create again)
    and the store's time of its write: aware UTC, the same in every listing until the key is
    written again, never going back, and the store clock's ``last_write_time()`` of that write
    within its ``clock_resolution`` where the store has one. (Paging: list-paging.)"""
    base = ctx.key("versions/")
    first, second = base + "a.json", base + "b/c.json"
    with opened(ctx) as store, opened(ctx) as other:
        if not isinstance(other, VersionedListing):
            return "no versioned listing (readers read every file they need)"
        etags = {first: store.create(first, b"a0")}
        written = {first: _write_time(store)}
        etags[second] = store.create(second, b"c0")
        written[second] = _write_time(store)
        before = _check_versions(store, other, base, etags, written)
        again = {one.key: one.modified for one in other.list_versions(base)}
        expect(
            again == {key: one.modified for key, one in before.items()},
            f"a second listing with no write between gave other times: {again}, first "
            f"{ {key: one.modified for key, one in before.items()} } (modified is the time of "
            "the write, by the store's clock, not the time of the listing)",
        )
        etags[first] = store.replace(first, b"a1", etags[first])
        written[first] = _write_time(store)
        store.delete(second)
        etags[second] = store.create(second, b"c1")
        written[second] = _write_time(store)
        after = _check_versions(store, other, base, etags, written)
        for key, what in ((first, "a replace"), (second, "a delete and a create")):
            expect(
                after[key].etag != before[key].etag,
                f"{key!r} was listed with etag {before[key].etag} before and after {what}",
            )
            expect(
                after[key].modified >= before[key].modified,
                f"{key!r} was listed as modified at {after[key].modified} after {what}, earlier "
                f"than before it ({before[key].modified})",
            )
    clock = "; modified within the store clock's resolution" if written[first] else ""
    return (
        "each key listed as list lists it, with the etag a read returns (new after a replace "
        f"and after delete and create) and a stable, aware UTC modified time{clock}"
    )


@registered("listing-changes")
def probe_listing_changes(ctx: ProbeContext) -> str:
    """A listing diffed against a cursor (:class:`ListingChanges`): without a cursor, the whole
    listing ``list_versions`` gives; from a cursor, the keys created or replaced since under
    the prefix at their current versions (in key order) and the keys deleted since, or the
    whole listing again (``complete``); taken into the earlier listing, either gives the
    listing ``list_versions`` gives now."""
    base = ctx.key("changes/")
    kept, replaced, deleted, added = (base + name for name in ("a.json", "b.json", "c.json", "d"))
    with opened(ctx) as store, opened(ctx) as other:
        if not isinstance(other, ListingChanges) or not isinstance(other, VersionedListing):
            return "no listing changes (readers list whole folders)"
        etags = {key: store.create(key, key.encode()) for key in (kept, replaced, deleted)}
        first = other.list_changes(base)
        now = list(other.list_versions(base))
        expect(first.complete, "list_changes without a cursor was not the whole listing")
        expect(
            first.listed == now and not first.removed,
            f"list_changes without a cursor gave {first.listed}, list_versions {now}",
        )
        store.replace(replaced, b"b1", etags[replaced])
        store.delete(deleted)
        store.create(added, b"d0")
        store.create(ctx.key("changes-beside.json"), b"x")  # outside the prefix
        changes = other.list_changes(base, first.cursor)
        now = list(other.list_versions(base))
        if changes.complete:
            expect(changes.listed == now, f"a complete answer {changes.listed}, now {now}")
        else:
            listed = [one.key for one in changes.listed]
            expect(
                listed == [replaced, added],
                f"from a cursor, listed {listed}; expected {[replaced, added]} (created or "
                "replaced since, under the prefix, in key order)",
            )
            expect(
                changes.removed == [deleted],
                f"from a cursor, removed {changes.removed}; expected {[deleted]}",
            )
        merged = {one.key: one for one in first.listed}
        for key in changes.removed:
            merged.pop(key, None)
        merged.update((one.key, one) for one in changes.listed)
        if changes.complete:
            merged = {one.key: one for one in changes.listed}
        expect(
            sorted(merged.values(), key=lambda one: one.key) == now,
            f"the first listing with the changes taken in gives {sorted(merged)}, "
            f"list_versions {[one.key for one in now]}",
        )
        again = other.list_changes(base, changes.cursor)
        expect(
            again.complete or (not again.listed and not again.removed),
            f"with no write between, list_changes gave {again.listed} and {again.removed}",
        )
        for key in (kept, replaced, added, ctx.key("changes-beside.json")):
            store.delete(key)
    return "the whole listing without a cursor; from one, what changed under the prefix"


def _write_time(store: Storage) -> datetime | None:
    """The store's time of its last write, where it tells (StoreClock)."""
    return store.last_write_time() if isinstance(store, StoreClock) else None


def _check_versions(
    store: Storage,
    other: VersionedListing,
    base: str,
    etags: dict[str, str],
    written: dict[str, datetime | None],
) -> dict[str, Listed]:
    """List ``base`` with versions from ``other`` and check each key against what was written."""
    listed = list(other.list_versions(base))
    keys = [one.key for one in listed]
    plain = list(store.list(base))
    expect(keys == plain, f"list_versions gave keys {keys}, list gave {plain}")
    expect(keys == sorted(etags), f"list_versions gave keys {keys}, expected {sorted(etags)}")
    resolution = timedelta(seconds=float(getattr(store, "clock_resolution", 0.0) or 0.0))
    for one in listed:
        blob = store.read(one.key)
        expect(
            blob is not None and one.etag == blob.etag == etags[one.key],
            f"{one.key!r} was listed with etag {one.etag}; a read gave "
            f"{'nothing' if blob is None else blob.etag}, the write {etags[one.key]}",
        )
        modified = one.modified
        expect(
            isinstance(modified, datetime) and modified.utcoffset() == timedelta(0),
            f"{one.key!r} was listed as modified at {modified!r}, expected an aware UTC time",
        )
        stamped = written[one.key]
        expect(
            stamped is None or abs(modified - stamped) <= resolution,
            f"{one.key!r} was listed as modified at {modified}, the store clock stamped its "
            f"write {stamped} (resolution {resolution.total_seconds()} s)",
        )
    return {one.key: one for one in listed}
