"""The after-write probes: what a reader sees while another process writes."""

from __future__ import annotations

from typing import Any

from fdcore.abc import (
    Blob,
    Storage,
)
from fdcore.conformance.crew import BARRIER_TIMEOUT, Crew, run_crew
from fdcore.conformance.framework import (
    ProbeContext,
    StorageFactory,
    expect,
    opened,
    registered,
    show_blob,
)
from fdcore.conformance.payloads import check_payload, make_payload
from fdcore.errors import PreconditionFailed

# -- read-after-write, list-after-write --------------------------------------------------------

#: What the writer of the after-write probes does, step by step, to one key.
_AFTER_WRITE_STEPS = (
    ("create", b"v1"),
    ("replace", b"v2"),
    ("replace", b"v3"),
    ("delete", b""),
    ("create", b"v4"),
    ("replace", b"v5"),
    ("delete", b""),
)


def _look(store: Storage, key: str, how: str) -> Any:
    return store.read(key) if how == "read" else list(store.list(key.rpartition("/")[0] + "/"))


def _after_write_worker(
    index: int, crew: Crew, factory: StorageFactory, key: str, how: str
) -> list[Any]:
    """Worker 0 writes each step; worker 1 reads (or lists) before it, to fill any cache it
    keeps, and again as soon as the write returned. Returns what each saw after each step."""
    store = factory()
    seen: list[Any] = []
    etag = ""
    try:
        for op, data in _AFTER_WRITE_STEPS:
            if index:
                _look(store, key, how)
            crew.start.wait(BARRIER_TIMEOUT)  # the reader has looked at the version before
            if not index:
                if op == "create":
                    etag = store.create(key, data)
                elif op == "replace":
                    etag = store.replace(key, data, etag)
                else:
                    store.delete(key, etag)
                wrote = Blob(data, etag) if op != "delete" else None
                seen.append(wrote if how == "read" else [key] if wrote else [])
            crew.start.wait(BARRIER_TIMEOUT)  # the write returned
            if index:
                seen.append(_look(store, key, how))
    finally:
        store.close()
    return seen


def _after_write(ctx: ProbeContext, how: str) -> str:
    key = ctx.key(f"consistency/{how}/value.json")
    wrote, saw = run_crew(ctx, 2, _after_write_worker, ctx.factory, key, how)
    other = "another process" if ctx.multiprocess else "another handle"
    for (op, _), expected, got in zip(_AFTER_WRITE_STEPS, wrote, saw, strict=True):
        shown = (show_blob(got), show_blob(expected)) if how == "read" else (got, expected)
        expect(
            got == expected,
            f"right after a {op} of {key} returned, {other} {how}{'' if how == 'read' else 'ed'} "
            f"{shown[0]}, expected "
            f"{shown[1]}: every {how} after a write must see it",
        )
    return f"{other} saw each of {len(_AFTER_WRITE_STEPS)} creates, replaces and deletes at once"


@registered("read-after-write")
def probe_read_after_write(ctx: ProbeContext) -> str:
    return _after_write(ctx, "read")


@registered("list-after-write")
def probe_list_after_write(ctx: ProbeContext) -> str:
    return _after_write(ctx, "list")


TORN_WRITERS = 2
TORN_READERS = 4


def _torn_sizes(ctx: ProbeContext) -> list[int]:
    # Large values widen the window a non-atomic write would leave open; capped to stay quick.
    return [200, 4097, max(min(ctx.max_payload, 256 << 10), 200)]


def _replace_with_retry(store: Storage, key: str, value: bytes, attempts: int = 100) -> bool:
    """Read-then-replace until it lands; another writer winning only means read again."""
    for _ in range(attempts):
        current = store.read(key)
        if current is None:
            return False
        try:
            store.replace(key, value, current.etag)
            return True
        except PreconditionFailed:
            continue
    return False


def _torn_worker(
    index: int, crew: Crew, factory: StorageFactory, base: str, writes: int, sizes: list[int]
) -> tuple[int, int, list[str]]:
    """Writers create then rewrite values; readers check each value they see is whole.

    Returns (operations, values seen while being created, problems seen).
    """
    store = factory()
    try:
        crew.start.wait(BARRIER_TIMEOUT)
        shared = f"{base}shared"
        if index < TORN_WRITERS:
            for n in range(writes):
                store.create(f"{base}c-{index}-{n}", make_payload(f"c{index}/{n}", sizes[n % 3]))
            for n in range(writes):
                if not _replace_with_retry(
                    store, shared, make_payload(f"r{index}/{n}", sizes[n % 3])
                ):
                    return (n, 0, [f"writer {index} could not replace the shared key"])
            return (2 * writes, 0, [])
        reads, created = 0, 0
        problems: list[str] = []
        next_created = [0] * TORN_WRITERS
        while not crew.stop.is_set() and len(problems) < 5:
            blob = store.read(shared)
            reads += 1
            problem = "nothing (absent)" if blob is None else check_payload(blob.data)
            if problem:
                problems.append(f"reader {index} read {problem} from the shared key")
            writer = reads % TORN_WRITERS
            key = f"{base}c-{writer}-{next_created[writer]}"
            blob = store.read(key)
            reads += 1
            if blob is not None:  # absent is fine: the writer has not created it yet
                problem = check_payload(blob.data)
                if problem:
                    problems.append(f"reader {index} read {problem} from {key} while created")
                next_created[writer] += 1
                created += 1
        return (reads, created, problems)
    finally:
        store.close()


@registered("no-partial-reads")
def probe_no_partial_reads(ctx: ProbeContext) -> str:
    base = ctx.key("torn/")
    sizes = _torn_sizes(ctx)
    writes = ctx.replace_rounds
    with opened(ctx) as store:
        store.create(f"{base}shared", make_payload("initial", sizes[-1]))
    size = TORN_WRITERS + TORN_READERS
    results = run_crew(
        ctx, size, _torn_worker, ctx.factory, base, writes, sizes, producers=TORN_WRITERS
    )
    problems = list(dict.fromkeys(problem for _, _, found in results for problem in found))
    expect(not problems, "; ".join(problems[:3]))
    reads = sum(result[0] for result in results[TORN_WRITERS:])
    created = sum(result[1] for result in results[TORN_WRITERS:])
    return (
        f"{TORN_WRITERS} writers x {writes} creates + {writes} replaces (up to {sizes[-1]} "
        f"bytes), {TORN_READERS} readers made {reads} reads ({created} of keys being created), "
        "none empty or partial"
    )
