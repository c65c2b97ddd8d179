"""The race probes: many writers at once, one winner per conditional write, no lost update."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from fdcore.abc import (
    Blob,
)
from fdcore.conformance.crew import BARRIER_TIMEOUT, Crew, run_crew
from fdcore.conformance.framework import (
    ProbeContext,
    StorageFactory,
    Violation,
    expect,
    expect_raises,
    opened,
    registered,
    show_blob,
)
from fdcore.errors import AlreadyExists, NotFound, PreconditionFailed


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
    index: int, crew: Crew, factory: StorageFactory, base: str, rounds: int
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
        raise Violation(f"round {round_}: worker {errors[0][0]}'s {what} raised {errors[0][1]}")
    expect(len(won) == 1, f"round {round_}: {len(won)} winners (workers {won})")
    return won[0]


def _racers(ctx: ProbeContext, count: int | None = None) -> str:
    return f"{count or ctx.processes} {'processes' if ctx.multiprocess else 'threads'}"


@registered("create-if-absent")
def probe_create_if_absent(ctx: ProbeContext) -> str:
    base = ctx.key("race/create-")
    outcomes = run_crew(ctx, ctx.processes, _create_racer, ctx.factory, base, ctx.create_rounds)
    with opened(ctx) as store:
        for round_ in range(ctx.create_rounds):
            winner = _winners(outcomes, round_, "create")
            blob = store.read(f"{base}{round_:04d}")
            expected = _racer_value(winner, round_)
            expect(
                blob is not None and blob.data == expected,
                f"round {round_}: worker {winner} won but the key holds {show_blob(blob)}",
            )
    return f"{_racers(ctx)} x {ctx.create_rounds} rounds, exactly one winner each"


def _replace_racer(
    index: int, crew: Crew, factory: StorageFactory, key: str, rounds: int
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


@registered("replace-if-match")
def probe_replace_if_match(ctx: ProbeContext) -> str:
    key = ctx.key("race/replace.json")
    with opened(ctx) as store:
        store.create(key, b"initial")
    rows = run_crew(ctx, ctx.processes, _replace_racer, ctx.factory, key, ctx.replace_rounds)
    outcomes = [[row[0] for row in worker] for worker in rows]
    previous = "initial"
    for round_ in range(ctx.replace_rounds):
        seen = {(worker[round_][1], worker[round_][2]) for worker in rows}
        expect(
            len(seen) == 1,
            f"round {round_}: racers read {len(seen)} different versions after the same replace",
        )
        ((_, value),) = seen
        expect(
            value == previous, f"round {round_}: read {value!r}, the last winner wrote {previous!r}"
        )
        winner = _winners(outcomes, round_, "replace")
        previous = _racer_value(winner, round_).decode()
    with opened(ctx) as store:
        blob = store.read(key)
        expect(
            blob is not None and blob.data.decode() == previous,
            f"after the last round the key holds {show_blob(blob)}, expected {previous!r}",
        )
    return (
        f"{_racers(ctx)} x {ctx.replace_rounds} rounds on one etag, exactly one winner each, "
        "and every racer then read the winner's value"
    )


def _delete_racer(
    index: int, crew: Crew, factory: StorageFactory, targets: list[tuple[str, str]]
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


@registered("delete-if-match")
def probe_delete_if_match(ctx: ProbeContext) -> str:
    key = ctx.key("delete/if-match.json")
    with opened(ctx) as store, opened(ctx) as other:
        first = store.create(key, b"first")
        second = store.replace(key, b"second", first)
        for etag, what in ((first, "a replaced etag"), ('"fdcore-made-up"', "a made-up etag")):
            expect_raises(
                PreconditionFailed, partial(store.delete, key, etag), f"delete with {what}"
            )
            blob = other.read(key)
            expect(
                blob == Blob(b"second", second),
                f"a refused delete with {what} left {show_blob(blob)}, expected b'second'",
            )
        store.delete(key, second)
        expect(other.read(key) is None, f"{key} still readable after delete with its etag")
        third = store.create(key, b"third")
        expect_raises(
            PreconditionFailed,
            partial(store.delete, key, second),
            "delete of a recreated key with its deleted version's etag",
        )
        store.delete(key, third)
    base = ctx.key("delete/race-")
    with opened(ctx) as store:
        targets = [
            (f"{base}{n:04d}", store.create(f"{base}{n:04d}", b"%d" % n))
            for n in range(ctx.delete_rounds)
        ]
    # a small crew: starting processes costs more than the rounds, and four already collide
    outcomes = run_crew(ctx, ctx.storm_workers, _delete_racer, ctx.factory, targets)
    for round_ in range(ctx.delete_rounds):
        _winners(outcomes, round_, "delete")
    with opened(ctx) as store:
        left = list(store.list(base))
        expect(not left, f"{len(left)} keys still listed after their delete won, e.g. {left[:1]}")
    return (
        "delete with a replaced, made-up or earlier life's etag raised PreconditionFailed; "
        f"{_racers(ctx, ctx.storm_workers)} x {ctx.delete_rounds} rounds deleting with one "
        "etag, one winner each"
    )


STORM_PATIENCE = 100  # refusals per landed write a storm worker tolerates before giving up


def _storm_worker(
    index: int, crew: Crew, factory: StorageFactory, key: str, writes: int
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


@registered("no-lost-updates")
def probe_no_lost_updates(ctx: ProbeContext) -> str:
    key = ctx.key("race/storm.json")
    with opened(ctx) as store:
        store.create(key, b"0 initial")
    results = run_crew(ctx, ctx.storm_workers, _storm_worker, ctx.factory, key, ctx.storm_writes)
    stopped = [why for _, _, why in results if why]
    expect(not stopped, "; ".join(stopped[:2]))
    replaced_by: dict[str, list[int]] = {}
    for worker, (based_on, _, _) in enumerate(results):
        for etag in based_on:
            replaced_by.setdefault(etag, []).append(worker)
    twice = {etag: workers for etag, workers in replaced_by.items() if len(workers) > 1}
    if twice:
        etag, workers = next(iter(twice.items()))
        raise Violation(
            f"{len(twice)} etags were each replaced by more than one writer, e.g. {etag} by "
            f"workers {workers}: all but one of them overwrote an update they never read"
        )
    landed = sum(len(based_on) for based_on, _, _ in results)
    with opened(ctx) as store:
        blob = store.read(key)
    count = int(blob.data.split(b" ", 1)[0]) if blob is not None else None
    expect(count == landed, f"{landed} replaces landed but the counter reads {count}: lost updates")
    refused = sum(refusals for _, refusals, _ in results)
    return (
        f"{_racers(ctx, ctx.storm_workers)} landed {landed} "
        f"read-and-replace increments on one key ({refused} refused as stale and retried): "
        "each etag replaced once, no update lost"
    )
