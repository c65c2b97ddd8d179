"""The storage conformance probes: each checks one property a mailbox relies on.

A probe is a plain function ``probe(ctx) -> Observation``. The pytest suite
(:mod:`fdcore.testing.storage_suite`) asserts each observation passed; ``fdcore doctor`` runs the
same functions against a live environment and prints them. Both share this one code path, so
what the suite proves on a vendor's laptop is what doctor proves on a tenant.

Every key a probe writes lies under ``ctx.prefix``. Races run their workers in real processes
(``ctx.multiprocess``), each opening its own store through the picklable ``ctx.factory``, or in
threads for stores that live in one process. Workers stay alive across rounds and meet at a
barrier before each, so hundreds of rounds take seconds.
"""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import os
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any, TypeVar

import attrs

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
from fdcore.errors import AlreadyExists, InvalidKey, NotFound, PreconditionFailed, UnreadableFile
from fdcore.plugins.manager import Plugins, load_plugins

#: A picklable zero-argument callable returning a new handle on one environment. Every call
#: opens the same environment, so workers in other processes see what the caller wrote.
StorageFactory = Callable[[], Storage]

BARRIER_TIMEOUT = 120.0  # seconds a worker waits for its peers before the round is abandoned
CREW_TIMEOUT = 900.0  # seconds a whole race may take before the probe gives up

E = TypeVar("E", bound=BaseException)


def _options(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


@functools.cache
def _installed_plugins() -> Plugins:
    # Once per process: race workers open many stores, loading entry points each time is waste.
    return load_plugins()


@attrs.frozen
class UrlStorageFactory:
    """Open ``url`` through the installed plugins; picklable, so race workers can reopen it."""

    url: str
    options: dict[str, str] = attrs.field(default=None, converter=_options)
    backend: str | None = None
    create: bool = True  # False: an existing environment only (doctor: one check per open)

    def __call__(self) -> Storage:
        plugins = _installed_plugins()
        return plugins.open_storage(self.url, self.options, self.backend, create=self.create)


@attrs.frozen
class Observation:
    """What one probe saw: ``detail`` summarises a pass, or says what was observed on a fail."""

    name: str
    passed: bool
    detail: str

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.detail}"


def _token() -> str:
    return uuid.uuid4().hex[:12]


@attrs.frozen
class ProbeContext:
    """Where and how hard the probes work."""

    factory: StorageFactory
    prefix: str = ""  # every key a probe writes starts with it ("" or e.g. "doctor-<hex>/")
    multiprocess: bool = True  # race in processes (False: threads, for in-process stores)
    processes: int = 16  # racers per round
    create_rounds: int = 200
    replace_rounds: int = 100
    max_payload: int = 1 << 20
    listing_size: int = 10_000
    threads: int = 8  # handles writing or removing many keys at once (see for_each_key)
    # the most keys one request of the store's listing returns; None: the store's own
    # ``list_page_size`` attribute if it has one, else DEFAULT_LIST_PAGE
    list_page_size: int | None = None
    storm_workers: int = 4  # processes of the replace storm and of the delete race
    storm_writes: int = 25  # replaces each storm worker lands
    delete_rounds: int = 10  # rounds of the delete-if-match race
    # optional protocols the store is declared to offer (OPTIONAL_PROTOCOLS' names): one that
    # is missing fails optional-protocols instead of going untested
    offers: tuple[str, ...] = ()
    token: str = attrs.field(factory=_token)  # unique per run, for names outside the prefix

    def key(self, rest: str) -> str:
        return self.prefix + rest


Probe = Callable[[ProbeContext], Observation]


class _Violation(Exception):
    """A probe observed the store break the property it checks."""


def _expect(condition: bool, observed: str) -> None:
    if not condition:
        raise _Violation(observed)


def _raises(error: type[E], call: Callable[[], object], what: str) -> E:
    try:
        call()
    except error as exc:
        return exc
    except Exception as exc:
        raise _Violation(
            f"{what} raised {type(exc).__name__}: {exc}, expected {error.__name__}"
        ) from None
    raise _Violation(f"{what} succeeded, expected {error.__name__}")


def _show(blob: Blob | None) -> str:
    if blob is None:
        return "nothing (absent)"
    data = blob.data if len(blob.data) <= 40 else blob.data[:40] + b"..."
    return f"{data!r} etag {blob.etag}"


#: Every probe by the name of the property it checks (its doctor line), e.g. "exact-prefix".
PROBES_BY_NAME: dict[str, Probe] = {}


def _probe(name: str) -> Callable[[Callable[[ProbeContext], str]], Probe]:
    """Turn a body that returns a pass summary or raises _Violation into a probe."""

    def wrap(body: Callable[[ProbeContext], str]) -> Probe:
        @functools.wraps(body)
        def probe(ctx: ProbeContext) -> Observation:
            try:
                detail = body(ctx)
            except _Violation as exc:
                return Observation(name, False, f"observed {exc}")
            except Exception as exc:  # any other error is an observation too, not a crash
                return Observation(name, False, f"observed {type(exc).__name__}: {exc}")
            return Observation(name, True, detail)

        PROBES_BY_NAME[name] = probe
        return probe

    return wrap


@contextmanager
def _opened(ctx: ProbeContext) -> Iterator[Storage]:
    storage = ctx.factory()
    try:
        yield storage
    finally:
        storage.close()


# -- self-checking payloads ----------------------------------------------------------------------


def make_payload(tag: str, size: int) -> bytes:
    """``size`` bytes (at least the header) that :func:`check_payload` can verify on their own."""
    body = random.Random(tag).randbytes(max(size - 80, 0))
    header = f"fdcore-probe {len(body)} {hashlib.sha256(body).hexdigest()}\n".encode()
    return header + body


def check_payload(data: bytes) -> str | None:
    """None if ``data`` is a complete payload; else what is wrong with it (empty, torn, mixed)."""
    if not data:
        return "an empty value"
    head, newline, body = data.partition(b"\n")
    parts = head.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != b"fdcore-probe" or not parts[1].isdigit():
        return f"a value without its header ({len(data)} bytes, starting {data[:24]!r})"
    if len(body) != int(parts[1]):
        return f"a partial value ({len(body)} of {int(parts[1])} body bytes)"
    if hashlib.sha256(body).hexdigest().encode() != parts[2]:
        return f"a value whose content does not match its hash ({len(body)} bytes)"
    return None


# -- basics --------------------------------------------------------------------------------------


@_probe("create-read-delete")
def probe_create_read_delete(ctx: ProbeContext) -> str:
    key = ctx.key("basic/create-read-delete.json")
    with _opened(ctx) as store, _opened(ctx) as other:
        etag = store.create(key, b"one")
        _expect(isinstance(etag, str) and bool(etag), f"create returned etag {etag!r}")
        for who, handle in (("the same handle", store), ("another handle", other)):
            blob = handle.read(key)
            _expect(
                blob == Blob(b"one", etag),
                f"read from {who} after create gave {_show(blob)}, expected b'one' etag {etag}",
            )
        store.delete(key)
        _expect(other.read(key) is None, f"{key} still readable after delete")
        again = store.create(key, b"two")
        blob = other.read(key)
        _expect(blob == Blob(b"two", again), f"recreated {key} read as {_show(blob)}")
        _expect(again != etag, f"a different value created after delete kept etag {etag}")
        store.delete(key, again)
        _expect(other.read(key) is None, f"{key} still readable after delete with its etag")
    return "create, read from two handles, delete, create again, delete by etag"


@_probe("replace-etag")
def probe_replace_etag(ctx: ProbeContext) -> str:
    key = ctx.key("basic/replace-etag.json")
    with _opened(ctx) as store, _opened(ctx) as other:
        etags = [store.create(key, b"v0")]
        for n in range(1, 4):
            etag = store.replace(key, f"v{n}".encode(), etags[-1])
            _expect(etag not in etags, f"replace {n} returned etag {etag}, already used before")
            etags.append(etag)
            blob = other.read(key)
            _expect(
                blob == Blob(f"v{n}".encode(), etag),
                f"read after replace {n} gave {_show(blob)}, expected b'v{n}' etag {etag}",
            )
        # Rewriting identical bytes must still hand back an etag that names what read returns.
        same = store.replace(key, b"v3", etags[-1])
        blob = other.read(key)
        _expect(blob == Blob(b"v3", same), f"read after same-bytes replace gave {_show(blob)}")
    return "3 replaces each gave a new etag; reads from another handle returned it"


@_probe("stale-etag-refused")
def probe_stale_etag_refused(ctx: ProbeContext) -> str:
    key = ctx.key("basic/stale-etag.json")
    with _opened(ctx) as store:
        old = store.create(key, b"old")
        new = store.replace(key, b"new", old)
        _raises(
            PreconditionFailed, lambda: store.replace(key, b"x", old), "replace with stale etag"
        )
        _raises(
            PreconditionFailed,
            lambda: store.replace(key, b"x", '"fdcore-made-up"'),
            "replace with a made-up etag",
        )
        blob = store.read(key)
        _expect(blob == Blob(b"new", new), f"refused writes changed the value: {_show(blob)}")
    return "replace with a stale or made-up etag raised PreconditionFailed"


@_probe("absent-key")
def probe_absent_key(ctx: ProbeContext) -> str:
    with _opened(ctx) as store:
        gone = ctx.key("basic/absent-after-delete.json")
        etag = store.create(gone, b"soon gone")
        store.delete(gone, etag)
        for key in (ctx.key("basic/never-written.json"), ctx.key("basic/no/such/dir/x"), gone):
            blob = store.read(key)
            _expect(blob is None, f"read of absent {key} gave {_show(blob)}")
            _raises(NotFound, partial(store.replace, key, b"x", etag), f"replace of absent {key}")
            _raises(NotFound, partial(store.delete, key), f"delete of absent {key}")
            _raises(NotFound, partial(store.delete, key, etag), f"delete-if-etag of absent {key}")
    return "read gave None; replace and delete raised NotFound (never written, or deleted)"


@_probe("create-existing-refused")
def probe_create_existing_refused(ctx: ProbeContext) -> str:
    key = ctx.key("basic/create-existing.json")
    with _opened(ctx) as store, _opened(ctx) as other:
        etag = store.create(key, b"first")
        _raises(AlreadyExists, lambda: store.create(key, b"second"), "second create")
        _raises(AlreadyExists, lambda: other.create(key, b"third"), "create from another handle")
        blob = other.read(key)
        _expect(blob == Blob(b"first", etag), f"a refused create changed the value: {_show(blob)}")
    return "create of an existing key raised AlreadyExists and left it unchanged"


# -- races ---------------------------------------------------------------------------------------


@attrs.frozen
class _Crew:
    """What every worker of a race shares: a start barrier, a stop signal, a result queue."""

    start: Any  # Barrier of all workers (threading or multiprocessing)
    stop: Any  # Event: set once the producing workers have finished
    results: Any  # Queue of (index, ok, value)


def _start_method() -> str:
    # forkserver forks from a clean server (no copied threads or locks), far cheaper than spawn.
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


def _crew_member(
    index: int,
    crew: _Crew,
    target: Callable[..., Any],
    args: tuple[Any, ...],
    environ: dict[str, str] | None = None,
) -> None:
    if environ is not None:
        # A forkserver keeps the environment it started with, maybe before a test's fixture
        # set the store's credentials: a worker runs in its caller's, as a spawned one would.
        os.environ.clear()
        os.environ.update(environ)
    try:
        value = target(index, crew, *args)
    except BaseException as exc:
        crew.start.abort()  # peers waiting at the barrier fail fast instead of hanging
        crew.results.put((index, False, f"{type(exc).__name__}: {exc}"))
    else:
        crew.results.put((index, True, value))


def _run_crew(
    ctx: ProbeContext, size: int, target: Callable[..., Any], *args: Any, producers: int = 0
) -> list[Any]:
    """Run ``target(index, crew, *args)`` in ``size`` workers; return their results by index.

    Once workers ``0..producers-1`` have returned, ``crew.stop`` is set for the others.
    A worker that raised or died makes the race a violation naming it.
    """
    workers: list[Any]
    if ctx.multiprocess:
        if _start_method() == "forkserver":
            mp: ForkServerContext | SpawnContext = multiprocessing.get_context("forkserver")
            mp.set_forkserver_preload([__name__])
        else:
            mp = multiprocessing.get_context("spawn")
        crew = _Crew(mp.Barrier(size), mp.Event(), mp.Queue())
        workers = [
            mp.Process(
                target=_crew_member, args=(i, crew, target, args, dict(os.environ)), daemon=True
            )
            for i in range(size)
        ]
    else:
        crew = _Crew(threading.Barrier(size), threading.Event(), queue.Queue())
        workers = [
            threading.Thread(target=_crew_member, args=(i, crew, target, args), daemon=True)
            for i in range(size)
        ]
    for worker in workers:
        worker.start()
    try:
        got = _collect(crew, workers, producers)
    finally:
        crew.stop.set()
        for worker in workers:
            worker.join(10)
            if ctx.multiprocess and worker.is_alive():
                worker.terminate()
                worker.join(5)
    failed = {index: value for index, (ok, value) in got.items() if not ok}
    if failed:
        # Name the cause, not a peer that only saw the barrier broken because of it.
        causes = [i for i in sorted(failed) if not failed[i].startswith("BrokenBarrierError")]
        index = (causes or sorted(failed))[0]
        raise _Violation(f"worker {index} of {size} failed: {failed[index]}")
    return [got[index][1] for index in range(size)]


def _collect(crew: _Crew, workers: list[Any], producers: int) -> dict[int, tuple[bool, Any]]:
    got: dict[int, tuple[bool, Any]] = {}
    seen_dead: set[int] = set()
    deadline = time.monotonic() + CREW_TIMEOUT
    while len(got) < len(workers):
        try:
            index, ok, value = crew.results.get(timeout=0.5)
        except queue.Empty:
            # A worker that died without reporting: give its last words one more poll first.
            dead = {i for i, w in enumerate(workers) if i not in got and not w.is_alive()}
            for index in dead & seen_dead:
                got[index] = (False, f"exited (code {getattr(workers[index], 'exitcode', None)})")
                crew.start.abort()
            seen_dead = dead
            if time.monotonic() > deadline:
                raise _Violation(f"race did not finish within {CREW_TIMEOUT:.0f}s") from None
            continue
        got[index] = (ok, value)
        if producers and all(i in got for i in range(producers)):
            crew.stop.set()
    return got


def _racer_value(index: int, round_: int) -> bytes:
    return f"racer {index} round {round_}".encode()


def _outcome(write: Callable[[], object], *losses: type[Exception]) -> str:
    """One racer's conditional write: "won", "lost" (one of ``losses``), or the error met,
    reported rather than raised so the round's other racers go on."""
    try:
        write()
    except losses:
        return "lost"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "won"


def _create_racer(
    index: int, crew: _Crew, factory: StorageFactory, base: str, rounds: int
) -> list[str]:
    """Each round: meet the others, then try to create the round's key. Returns outcomes."""
    outcomes = []
    store = factory()
    try:
        for round_ in range(rounds):
            crew.start.wait(BARRIER_TIMEOUT)
            value = _racer_value(index, round_)
            write = partial(store.create, f"{base}{round_:04d}", value)
            outcomes.append(_outcome(write, AlreadyExists))
    finally:
        store.close()
    return outcomes


def _winners(outcomes: list[list[str]], round_: int, what: str) -> int:
    """The one worker that won ``round_``, or a violation describing what happened instead."""
    won = [i for i, rows in enumerate(outcomes) if rows[round_] == "won"]
    errors = [
        (i, rows[round_]) for i, rows in enumerate(outcomes) if rows[round_] not in ("won", "lost")
    ]
    if errors:
        raise _Violation(f"round {round_}: worker {errors[0][0]}'s {what} raised {errors[0][1]}")
    _expect(len(won) == 1, f"round {round_}: {len(won)} winners (workers {won})")
    return won[0]


def _racers(ctx: ProbeContext, count: int | None = None) -> str:
    return f"{count or ctx.processes} {'processes' if ctx.multiprocess else 'threads'}"


@_probe("create-if-absent")
def probe_create_if_absent(ctx: ProbeContext) -> str:
    base = ctx.key("race/create-")
    outcomes = _run_crew(ctx, ctx.processes, _create_racer, ctx.factory, base, ctx.create_rounds)
    with _opened(ctx) as store:
        for round_ in range(ctx.create_rounds):
            winner = _winners(outcomes, round_, "create")
            blob = store.read(f"{base}{round_:04d}")
            expected = _racer_value(winner, round_)
            _expect(
                blob is not None and blob.data == expected,
                f"round {round_}: worker {winner} won but the key holds {_show(blob)}",
            )
    return f"{_racers(ctx)} x {ctx.create_rounds} rounds, exactly one winner each"


def _replace_racer(
    index: int, crew: _Crew, factory: StorageFactory, key: str, rounds: int
) -> list[tuple[str, str, str]]:
    """Each round: read the key, meet the others, replace with that etag.

    Returns per round (outcome, etag read, value read); the value read at round r+1 must be
    what round r's winner wrote.
    """
    rows = []
    store = factory()
    try:
        for round_ in range(rounds):
            crew.start.wait(BARRIER_TIMEOUT)  # every replace of the last round is over
            blob = store.read(key)
            crew.start.wait(BARRIER_TIMEOUT)  # everyone holds this round's etag
            if blob is None:
                rows.append(("read gave nothing", "", ""))
                continue
            write = partial(store.replace, key, _racer_value(index, round_), blob.etag)
            outcome = _outcome(write, PreconditionFailed)
            rows.append((outcome, blob.etag, blob.data.decode(errors="replace")))
    finally:
        store.close()
    return rows


@_probe("replace-if-match")
def probe_replace_if_match(ctx: ProbeContext) -> str:
    key = ctx.key("race/replace.json")
    with _opened(ctx) as store:
        store.create(key, b"initial")
    rows = _run_crew(ctx, ctx.processes, _replace_racer, ctx.factory, key, ctx.replace_rounds)
    outcomes = [[row[0] for row in worker] for worker in rows]
    previous = "initial"
    for round_ in range(ctx.replace_rounds):
        seen = {(worker[round_][1], worker[round_][2]) for worker in rows}
        _expect(
            len(seen) == 1,
            f"round {round_}: racers read {len(seen)} different versions after the same replace",
        )
        ((_, value),) = seen
        _expect(
            value == previous, f"round {round_}: read {value!r}, the last winner wrote {previous!r}"
        )
        winner = _winners(outcomes, round_, "replace")
        previous = _racer_value(winner, round_).decode()
    with _opened(ctx) as store:
        blob = store.read(key)
        _expect(
            blob is not None and blob.data.decode() == previous,
            f"after the last round the key holds {_show(blob)}, expected {previous!r}",
        )
    return (
        f"{_racers(ctx)} x {ctx.replace_rounds} rounds on one etag, exactly one winner each, "
        "and every racer then read the winner's value"
    )


def _delete_racer(
    index: int, crew: _Crew, factory: StorageFactory, targets: list[tuple[str, str]]
) -> list[str]:
    """Each round: meet the others, then delete the round's key with the etag all were given."""
    outcomes = []
    store = factory()
    try:
        for key, etag in targets:
            crew.start.wait(BARRIER_TIMEOUT)
            # a loser finds the key gone (NotFound) or, on some stores, its etag stale
            outcomes.append(
                _outcome(partial(store.delete, key, etag), NotFound, PreconditionFailed)
            )
    finally:
        store.close()
    return outcomes


@_probe("delete-if-match")
def probe_delete_if_match(ctx: ProbeContext) -> str:
    key = ctx.key("delete/if-match.json")
    with _opened(ctx) as store, _opened(ctx) as other:
        first = store.create(key, b"first")
        second = store.replace(key, b"second", first)
        for etag, what in ((first, "a replaced etag"), ('"fdcore-made-up"', "a made-up etag")):
            _raises(PreconditionFailed, partial(store.delete, key, etag), f"delete with {what}")
            blob = other.read(key)
            _expect(
                blob == Blob(b"second", second),
                f"a refused delete with {what} left {_show(blob)}, expected b'second'",
            )
        store.delete(key, second)
        _expect(other.read(key) is None, f"{key} still readable after delete with its etag")
        third = store.create(key, b"third")
        _raises(
            PreconditionFailed,
            partial(store.delete, key, second),
            "delete of a recreated key with its deleted version's etag",
        )
        store.delete(key, third)
    base = ctx.key("delete/race-")
    with _opened(ctx) as store:
        targets = [
            (f"{base}{n:04d}", store.create(f"{base}{n:04d}", b"%d" % n))
            for n in range(ctx.delete_rounds)
        ]
    # a small crew: starting processes costs more than the rounds, and four already collide
    outcomes = _run_crew(ctx, ctx.storm_workers, _delete_racer, ctx.factory, targets)
    for round_ in range(ctx.delete_rounds):
        _winners(outcomes, round_, "delete")
    with _opened(ctx) as store:
        left = _listed(store, base)
        _expect(not left, f"{len(left)} keys still listed after their delete won, e.g. {left[:1]}")
    return (
        "delete with a replaced, made-up or earlier life's etag raised PreconditionFailed; "
        f"{_racers(ctx, ctx.storm_workers)} x {ctx.delete_rounds} rounds deleting with one "
        "etag, one winner each"
    )


STORM_PATIENCE = 100  # refusals per landed write a storm worker tolerates before giving up


def _storm_worker(
    index: int, crew: _Crew, factory: StorageFactory, key: str, writes: int
) -> tuple[list[str], int, str]:
    """Land ``writes`` increments of the counter in ``key``: read, add one, replace with the
    etag read, again on a refusal; no barrier between writes, so the workers collide freely.

    Returns (the etag each landed replace replaced, refusals, why it stopped short or "").
    """
    based_on: list[str] = []
    refused = 0
    store = factory()
    try:
        crew.start.wait(BARRIER_TIMEOUT)
        while len(based_on) < writes:
            blob = store.read(key)
            if blob is None:
                return based_on, refused, f"worker {index} read the counter as absent"
            count = int(blob.data.split(b" ", 1)[0])
            try:
                store.replace(key, b"%d by worker %d" % (count + 1, index), blob.etag)
            except PreconditionFailed:
                refused += 1
                if refused > STORM_PATIENCE * writes:
                    return based_on, refused, f"worker {index} was refused {refused} times"
                continue
            based_on.append(blob.etag)
    finally:
        store.close()
    return based_on, refused, ""


@_probe("no-lost-updates")
def probe_no_lost_updates(ctx: ProbeContext) -> str:
    key = ctx.key("race/storm.json")
    with _opened(ctx) as store:
        store.create(key, b"0 initial")
    results = _run_crew(ctx, ctx.storm_workers, _storm_worker, ctx.factory, key, ctx.storm_writes)
    stopped = [why for _, _, why in results if why]
    _expect(not stopped, "; ".join(stopped[:2]))
    replaced_by: dict[str, list[int]] = {}
    for worker, (based_on, _, _) in enumerate(results):
        for etag in based_on:
            replaced_by.setdefault(etag, []).append(worker)
    twice = {etag: workers for etag, workers in replaced_by.items() if len(workers) > 1}
    if twice:
        etag, workers = next(iter(twice.items()))
        raise _Violation(
            f"{len(twice)} etags were each replaced by more than one writer, e.g. {etag} by "
            f"workers {workers}: all but one of them overwrote an update they never read"
        )
    landed = sum(len(based_on) for based_on, _, _ in results)
    with _opened(ctx) as store:
        blob = store.read(key)
    count = int(blob.data.split(b" ", 1)[0]) if blob is not None else None
    _expect(
        count == landed, f"{landed} replaces landed but the counter reads {count}: lost updates"
    )
    refused = sum(refusals for _, refusals, _ in results)
    return (
        f"{_racers(ctx, ctx.storm_workers)} landed {landed} "
        f"read-and-replace increments on one key ({refused} refused as stale and retried): "
        "each etag replaced once, no update lost"
    )


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
    index: int, crew: _Crew, factory: StorageFactory, key: str, how: str
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
    wrote, saw = _run_crew(ctx, 2, _after_write_worker, ctx.factory, key, how)
    other = "another process" if ctx.multiprocess else "another handle"
    for (op, _), expected, got in zip(_AFTER_WRITE_STEPS, wrote, saw, strict=True):
        shown = (_show(got), _show(expected)) if how == "read" else (got, expected)
        _expect(
            got == expected,
            f"right after a {op} of {key} returned, {other} {how}{'' if how == 'read' else 'ed'} "
            f"{shown[0]}, expected "
            f"{shown[1]}: every {how} after a write must see it",
        )
    return f"{other} saw each of {len(_AFTER_WRITE_STEPS)} creates, replaces and deletes at once"


@_probe("read-after-write")
def probe_read_after_write(ctx: ProbeContext) -> str:
    return _after_write(ctx, "read")


@_probe("list-after-write")
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
    index: int, crew: _Crew, factory: StorageFactory, base: str, writes: int, sizes: list[int]
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


@_probe("no-partial-reads")
def probe_no_partial_reads(ctx: ProbeContext) -> str:
    base = ctx.key("torn/")
    sizes = _torn_sizes(ctx)
    writes = ctx.replace_rounds
    with _opened(ctx) as store:
        store.create(f"{base}shared", make_payload("initial", sizes[-1]))
    size = TORN_WRITERS + TORN_READERS
    results = _run_crew(
        ctx, size, _torn_worker, ctx.factory, base, writes, sizes, producers=TORN_WRITERS
    )
    problems = list(dict.fromkeys(problem for _, _, found in results for problem in found))
    _expect(not problems, "; ".join(problems[:3]))
    reads = sum(result[0] for result in results[TORN_WRITERS:])
    created = sum(result[1] for result in results[TORN_WRITERS:])
    return (
        f"{TORN_WRITERS} writers x {writes} creates + {writes} replaces (up to {sizes[-1]} "
        f"bytes), {TORN_READERS} readers made {reads} reads ({created} of keys being created), "
        "none empty or partial"
    )


# -- listing, sizes, keys ------------------------------------------------------------------------


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


@_probe("list-by-prefix")
def probe_list_by_prefix(ctx: ProbeContext) -> str:
    base = ctx.key("list/")
    bulk = {f"{base}bulk/{n % 16:x}/{n:06d}.json": b"%d" % n for n in range(ctx.listing_size)}
    for_each_key(ctx, bulk, lambda store, key: store.create(key, bulk[key]))
    with _opened(ctx) as store:
        listed = list(store.list(f"{base}bulk/"))
        _expect(len(listed) == len(bulk), f"list gave {len(listed)} of {len(bulk)} keys")
        _expect(listed == sorted(bulk), "list did not give every key once, in sorted order")
        third = [key for key in sorted(bulk) if key.startswith(f"{base}bulk/3/")]
        listed = list(store.list(f"{base}bulk/3"))
        _expect(listed == third, f"list of bulk/3 gave {len(listed)} keys, expected {len(third)}")
        everything = list(store.list(base))
        _expect(everything == sorted(bulk), "list of the whole probe folder differed")
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


@_probe("exact-prefix")
def probe_exact_prefix(ctx: ProbeContext) -> str:
    base = ctx.key("exact/")
    with _opened(ctx) as store, _opened(ctx) as other:
        for key in EXACT_PREFIX_KEYS:
            store.create(base + key, key.encode())
        for prefix in EXACT_PREFIXES:
            expected = sorted(key for key in EXACT_PREFIX_KEYS if key.startswith(prefix))
            listed = [key.removeprefix(base) for key in other.list(base + prefix)]
            _expect(
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


@_probe("list-paging")
def probe_list_paging(ctx: ProbeContext) -> str:
    with _opened(ctx) as store:
        page = ctx.list_page_size or getattr(store, "list_page_size", None) or DEFAULT_LIST_PAGE
    base = ctx.key("paging/")
    inside = [f"{base}in/{n:06d}" for n in range(2 * page + 1)]
    # beside the prefix on both sides: a listing that pages past its end would show them
    beside = [f"{base}im/x", f"{base}in.x", f"{base}in0", f"{base}io/x"]
    for_each_key(ctx, [*inside, *beside], lambda store, key: store.create(key, b"p"))
    also = ""
    with _opened(ctx) as store:
        _check_pages("list", list(store.list(f"{base}in/")), inside, page)
        if isinstance(store, VersionedListing):
            versions = [one.key for one in store.list_versions(f"{base}in/")]
            _check_pages("list_versions", versions, inside, page)
            also = " (and by list_versions)"
    return (
        f"{len(inside)} keys listed over 3 pages of {page}{also}, and none from beside the prefix"
    )


def _check_pages(how: str, listed: list[str], inside: list[str], page: int) -> None:
    _expect(
        len(listed) == len(inside),
        f"{how} gave {len(listed)} of {len(inside)} keys (pages of {page}): a listing must "
        "follow every page of the store's listing",
    )
    _expect(
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


@_probe("distinct-keys")
def probe_distinct_keys(ctx: ProbeContext) -> str:
    base = ctx.key("distinct/")
    keys = sorted({base + key for pair in DISTINCT_KEYS for key in pair})
    with _opened(ctx) as store, _opened(ctx) as other:
        etags: dict[str, str] = {}
        for pair in DISTINCT_KEYS:
            for key, twin in (pair, pair[::-1]):
                if base + key in etags:
                    continue
                try:
                    etags[base + key] = store.create(base + key, (base + key).encode())
                except Exception as exc:
                    raise _Violation(
                        f"create of {key!a} beside {twin!a} raised {type(exc).__name__}: "
                        f"{exc}; keys that differ only by case or Unicode form are different keys"
                    ) from None
        for key in keys:
            blob = other.read(key)
            _expect(
                blob == Blob(key.encode(), etags[key]),
                f"{key!r} read back as {_show(blob)}: a key that differs from another only by "
                "case or Unicode form must keep its own value",
            )
        listed = list(other.list(base))
        _expect(listed == keys, f"list gave {listed}, expected {keys}")
        store.delete(keys[0], etags[keys[0]])
        rest = list(other.list(base))
        _expect(rest == keys[1:], f"deleting {keys[0]!r} left {rest}, expected {keys[1:]}")
    return (
        f"{len(keys)} keys differing only by case, NFC/NFD form, ß/ss or a ligature were kept "
        "apart: each created, read, listed and deleted on its own"
    )


@_probe("size-bound")
def probe_size_bound(ctx: ProbeContext) -> str:
    """A value of exactly the bound is read whole; with a bounded read, one byte more is
    refused, never returned or cut short."""
    bound = ctx.max_payload
    at, over = ctx.key("bound/at.bin"), ctx.key("bound/over.bin")
    with _opened(ctx) as store:
        data = random.Random(bound).randbytes(bound)
        etag = store.create(at, data)
        blob = read_mailbox_file(store, at, bound)
        _expect(
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
            _raises(
                UnreadableFile,
                partial(store.read_bounded, key, limit),
                f"read_bounded({limit}) of a {what} value",
            )
        blob = store.read_bounded(at, bound + 1)
        _expect(blob == Blob(data, etag), f"read_bounded under its bound gave {_show(blob)}")
    return f"a {bound}-byte value read whole at its bound; one byte more refused (UnreadableFile)"


@_probe("large-payload")
def probe_large_payload(ctx: ProbeContext) -> str:
    key = ctx.key("large/value.bin")
    sizes = [0, 1, 65537, ctx.max_payload]
    with _opened(ctx) as store, _opened(ctx) as other:
        etag = None
        for size in sizes:
            data = random.Random(size).randbytes(size)
            etag = store.create(key, data) if etag is None else store.replace(key, data, etag)
            blob = other.read(key)
            _expect(blob is not None, f"{size}-byte value read back as absent")
            assert blob is not None
            _expect(
                blob.data == data,
                f"{size}-byte value read back as {len(blob.data)} bytes"
                + ("" if len(blob.data) != size else " with different content"),
            )
            _expect(blob.etag == etag, f"{size}-byte value read back with another etag")
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


@_probe("unusual-keys")
def probe_unusual_keys(ctx: ProbeContext) -> str:
    base = ctx.key("keys/")
    keys = [base + name for name in UNUSUAL_NAMES]
    with _opened(ctx) as store, _opened(ctx) as other:
        etags = {key: store.create(key, key.encode()) for key in keys}
        for key in keys:
            blob = other.read(key)
            _expect(blob == Blob(key.encode(), etags[key]), f"{key!r} read back as {_show(blob)}")
        listed = list(other.list(base))
        _expect(listed == sorted(keys), f"list gave {listed}, expected {sorted(keys)}")
        for key in keys:
            _expect(list(other.list(key)) == [key], f"list of prefix {key!r} did not give it")
            store.replace(key, b"replaced", etags[key])
            store.delete(key)
            _expect(other.read(key) is None, f"{key!r} still readable after delete")
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


@_probe("invalid-keys")
def probe_invalid_keys(ctx: ProbeContext) -> str:
    keys = invalid_keys(f"fdcore-probe-{ctx.token}")
    with _opened(ctx) as store:
        for key in keys:
            _raises(InvalidKey, partial(store.read, key), f"read({key!r})")
            _raises(InvalidKey, partial(store.create, key, b"x"), f"create({key!r})")
            _raises(InvalidKey, partial(store.replace, key, b"x", '"e"'), f"replace({key!r})")
            _raises(InvalidKey, partial(store.delete, key), f"delete({key!r})")
        for prefix in (f"../{ctx.token}", f".{ctx.token}", f"{ctx.token}\\x", f"/{ctx.token}"):
            _raises(InvalidKey, partial(_listed, store, prefix), f"list({prefix!r})")
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


@_probe("optional-protocols")
def probe_optional_protocols(ctx: ProbeContext) -> str:
    """What a store offers beyond Storage keeps its word: a change check never calls a changed
    or deleted key unchanged, a store clock gives an aware time for each write. (A bounded
    read's bound is probed by size-bound.)"""
    unknown = sorted(set(ctx.offers) - set(OPTIONAL_PROTOCOLS))
    _expect(not unknown, f"offers names {unknown}, not among {sorted(OPTIONAL_PROTOCOLS)}")
    key = ctx.key("optional/value.json")
    with _opened(ctx) as store:
        offered = [name for name, kind in OPTIONAL_PROTOCOLS.items() if isinstance(store, kind)]
        missing = [name for name in ctx.offers if name not in offered]
        _expect(not missing, f"a store declared to offer {missing} does not (it has {offered})")
        etag = store.create(key, b"x" * 100)
        if isinstance(store, StoreClock):
            stamped = store.last_write_time()
            _expect(
                stamped is not None and stamped.tzinfo is not None,
                f"last_write_time() after a create gave {stamped!r}, expected an aware time",
            )
        if isinstance(store, ChangeCheck):
            _expect(store.unchanged(key, etag), f"unchanged({key!r}, its own etag) was False")
            newer = store.replace(key, b"y", etag)
            _expect(not store.unchanged(key, etag), "a replaced key was called unchanged")
            store.delete(key)
            _expect(not store.unchanged(key, newer), "a deleted key was called unchanged")
        else:
            store.delete(key)
    return f"offers {', '.join(offered)}" if offered else "offers no optional protocol"


@_probe("versioned-listing")
def probe_versioned_listing(ctx: ProbeContext) -> str:
    """A listing with versions (:class:`VersionedListing`) lists the keys ``list`` does, each
    with the etag a read returns (a new one after a replace, and after delete and create again)
    and the store's time of its write: aware UTC, the same in every listing until the key is
    written again, never going back, and the store clock's ``last_write_time()`` of that write
    within its ``clock_resolution`` where the store has one. (Paging: list-paging.)"""
    base = ctx.key("versions/")
    first, second = base + "a.json", base + "b/c.json"
    with _opened(ctx) as store, _opened(ctx) as other:
        if not isinstance(other, VersionedListing):
            return "no versioned listing (readers read every file they need)"
        etags = {first: store.create(first, b"a0")}
        written = {first: _write_time(store)}
        etags[second] = store.create(second, b"c0")
        written[second] = _write_time(store)
        before = _check_versions(store, other, base, etags, written)
        again = {one.key: one.modified for one in other.list_versions(base)}
        _expect(
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
            _expect(
                after[key].etag != before[key].etag,
                f"{key!r} was listed with etag {before[key].etag} before and after {what}",
            )
            _expect(
                after[key].modified >= before[key].modified,
                f"{key!r} was listed as modified at {after[key].modified} after {what}, earlier "
                f"than before it ({before[key].modified})",
            )
    clock = "; modified within the store clock's resolution" if written[first] else ""
    return (
        "each key listed as list lists it, with the etag a read returns (new after a replace "
        f"and after delete and create) and a stable, aware UTC modified time{clock}"
    )


@_probe("listing-changes")
def probe_listing_changes(ctx: ProbeContext) -> str:
    """A listing diffed against a cursor (:class:`ListingChanges`): without a cursor, the whole
    listing ``list_versions`` gives; from a cursor, the keys created or replaced since under
    the prefix at their current versions (in key order) and the keys deleted since, or the
    whole listing again (``complete``); taken into the earlier listing, either gives the
    listing ``list_versions`` gives now."""
    base = ctx.key("changes/")
    kept, replaced, deleted, added = (base + name for name in ("a.json", "b.json", "c.json", "d"))
    with _opened(ctx) as store, _opened(ctx) as other:
        if not isinstance(other, ListingChanges) or not isinstance(other, VersionedListing):
            return "no listing changes (readers list whole folders)"
        etags = {key: store.create(key, key.encode()) for key in (kept, replaced, deleted)}
        first = other.list_changes(base)
        now = list(other.list_versions(base))
        _expect(first.complete, "list_changes without a cursor was not the whole listing")
        _expect(
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
            _expect(changes.listed == now, f"a complete answer {changes.listed}, now {now}")
        else:
            listed = [one.key for one in changes.listed]
            _expect(
                listed == [replaced, added],
                f"from a cursor, listed {listed}; expected {[replaced, added]} (created or "
                "replaced since, under the prefix, in key order)",
            )
            _expect(
                changes.removed == [deleted],
                f"from a cursor, removed {changes.removed}; expected {[deleted]}",
            )
        merged = {one.key: one for one in first.listed}
        for key in changes.removed:
            merged.pop(key, None)
        merged.update((one.key, one) for one in changes.listed)
        if changes.complete:
            merged = {one.key: one for one in changes.listed}
        _expect(
            sorted(merged.values(), key=lambda one: one.key) == now,
            f"the first listing with the changes taken in gives {sorted(merged)}, "
            f"list_versions {[one.key for one in now]}",
        )
        again = other.list_changes(base, changes.cursor)
        _expect(
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
    _expect(keys == plain, f"list_versions gave keys {keys}, list gave {plain}")
    _expect(keys == sorted(etags), f"list_versions gave keys {keys}, expected {sorted(etags)}")
    resolution = timedelta(seconds=float(getattr(store, "clock_resolution", 0.0) or 0.0))
    for one in listed:
        blob = store.read(one.key)
        _expect(
            blob is not None and one.etag == blob.etag == etags[one.key],
            f"{one.key!r} was listed with etag {one.etag}; a read gave "
            f"{'nothing' if blob is None else blob.etag}, the write {etags[one.key]}",
        )
        modified = one.modified
        _expect(
            isinstance(modified, datetime) and modified.utcoffset() == timedelta(0),
            f"{one.key!r} was listed as modified at {modified!r}, expected an aware UTC time",
        )
        stamped = written[one.key]
        _expect(
            stamped is None or abs(modified - stamped) <= resolution,
            f"{one.key!r} was listed as modified at {modified}, the store clock stamped its "
            f"write {stamped} (resolution {resolution.total_seconds()} s)",
        )
    return {one.key: one for one in listed}


#: Every probe, in the order doctor runs them (cheap first, so a broken store fails fast).
PROBES: tuple[Probe, ...] = (
    probe_create_read_delete,
    probe_replace_etag,
    probe_stale_etag_refused,
    probe_absent_key,
    probe_create_existing_refused,
    probe_invalid_keys,
    probe_unusual_keys,
    probe_distinct_keys,
    probe_exact_prefix,
    probe_large_payload,
    probe_size_bound,
    probe_read_after_write,
    probe_list_after_write,
    probe_list_by_prefix,
    probe_list_paging,
    probe_create_if_absent,
    probe_replace_if_match,
    probe_delete_if_match,
    probe_no_lost_updates,
    probe_no_partial_reads,
    probe_optional_protocols,
    probe_versioned_listing,
    probe_listing_changes,
)
