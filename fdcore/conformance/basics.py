"""The basic probes: one handle, one key at a time (create, read, replace, delete)."""

from __future__ import annotations

from functools import partial

from fdcore.abc import (
    Blob,
)
from fdcore.conformance.framework import (
    ProbeContext,
    expect,
    expect_raises,
    opened,
    registered,
    show_blob,
)
from fdcore.errors import AlreadyExists, NotFound, PreconditionFailed


@registered("create-read-delete")
def probe_create_read_delete(ctx: ProbeContext) -> str:
    key = ctx.key("basic/create-read-delete.json")
    with opened(ctx) as store, opened(ctx) as other:
        etag = store.create(key, b"one")
        expect(isinstance(etag, str) and bool(etag), f"create returned etag {etag!r}")
        for who, handle in (("the same handle", store), ("another handle", other)):
            blob = handle.read(key)
            expect(
                blob == Blob(b"one", etag),
                f"read from {who} after create gave {show_blob(blob)}, expected b'one' etag {etag}",
            )
        store.delete(key)
        expect(other.read(key) is None, f"{key} still readable after delete")
        again = store.create(key, b"two")
        blob = other.read(key)
        expect(blob == Blob(b"two", again), f"recreated {key} read as {show_blob(blob)}")
        expect(again != etag, f"a different value created after delete kept etag {etag}")
        store.delete(key, again)
        expect(other.read(key) is None, f"{key} still readable after delete with its etag")
    return "create, read from two handles, delete, create again, delete by etag"


@registered("replace-etag")
def probe_replace_etag(ctx: ProbeContext) -> str:
    key = ctx.key("basic/replace-etag.json")
    with opened(ctx) as store, opened(ctx) as other:
        etags = [store.create(key, b"v0")]
        for n in range(1, 4):
            etag = store.replace(key, f"v{n}".encode(), etags[-1])
            expect(etag not in etags, f"replace {n} returned etag {etag}, already used before")
            etags.append(etag)
            blob = other.read(key)
            expect(
                blob == Blob(f"v{n}".encode(), etag),
                f"read after replace {n} gave {show_blob(blob)}, expected b'v{n}' etag {etag}",
            )
        # Rewriting identical bytes must still hand back an etag that names what read returns.
        same = store.replace(key, b"v3", etags[-1])
        blob = other.read(key)
        expect(blob == Blob(b"v3", same), f"read after same-bytes replace gave {show_blob(blob)}")
    return "3 replaces each gave a new etag; reads from another handle returned it"


@registered("stale-etag-refused")
def probe_stale_etag_refused(ctx: ProbeContext) -> str:
    key = ctx.key("basic/stale-etag.json")
    with opened(ctx) as store:
        old = store.create(key, b"old")
        new = store.replace(key, b"new", old)
        expect_raises(
            PreconditionFailed, lambda: store.replace(key, b"x", old), "replace with stale etag"
        )
        expect_raises(
            PreconditionFailed,
            lambda: store.replace(key, b"x", '"fdcore-made-up"'),
            "replace with a made-up etag",
        )
        blob = store.read(key)
        expect(blob == Blob(b"new", new), f"refused writes changed the value: {show_blob(blob)}")
    return "replace with a stale or made-up etag raised PreconditionFailed"


@registered("absent-key")
def probe_absent_key(ctx: ProbeContext) -> str:
    with opened(ctx) as store:
        gone = ctx.key("basic/absent-after-delete.json")
        etag = store.create(gone, b"soon gone")
        store.delete(gone, etag)
        for key in (ctx.key("basic/never-written.json"), ctx.key("basic/no/such/dir/x"), gone):
            blob = store.read(key)
            expect(blob is None, f"read of absent {key} gave {show_blob(blob)}")
            expect_raises(
                NotFound, partial(store.replace, key, b"x", etag), f"replace of absent {key}"
            )
            expect_raises(NotFound, partial(store.delete, key), f"delete of absent {key}")
            expect_raises(
                NotFound, partial(store.delete, key, etag), f"delete-if-etag of absent {key}"
            )
    return "read gave None; replace and delete raised NotFound (never written, or deleted)"


@registered("create-existing-refused")
def probe_create_existing_refused(ctx: ProbeContext) -> str:
    key = ctx.key("basic/create-existing.json")
    with opened(ctx) as store, opened(ctx) as other:
        etag = store.create(key, b"first")
        expect_raises(AlreadyExists, lambda: store.create(key, b"second"), "second create")
        expect_raises(
            AlreadyExists, lambda: other.create(key, b"third"), "create from another handle"
        )
        blob = other.read(key)
        expect(
            blob == Blob(b"first", etag), f"a refused create changed the value: {show_blob(blob)}"
        )
    return "create of an existing key raised AlreadyExists and left it unchanged"
