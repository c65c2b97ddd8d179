"""The race harness: workers in real processes (or threads) that meet at a barrier each round.

Workers stay alive across rounds, so hundreds of rounds take seconds. Each opens its own
store through the picklable factory; a worker that raised or died makes the race a
violation naming it.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any

import attrs

from fdcore.conformance.framework import (
    ProbeContext,
    Violation,
)

BARRIER_TIMEOUT = 120.0  # seconds a worker waits for its peers before the round is abandoned
CREW_TIMEOUT = 900.0  # seconds a whole race may take before the probe gives up


@attrs.frozen
class Crew:
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
    crew: Crew,
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


def run_crew(
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
            # every probe family, so a worker finds its target already imported
            mp.set_forkserver_preload(["fdcore.conformance.probes"])
        else:
            mp = multiprocessing.get_context("spawn")
        crew = Crew(mp.Barrier(size), mp.Event(), mp.Queue())
        workers = [
            mp.Process(
                target=_crew_member, args=(i, crew, target, args, dict(os.environ)), daemon=True
            )
            for i in range(size)
        ]
    else:
        crew = Crew(threading.Barrier(size), threading.Event(), queue.Queue())
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
        raise Violation(f"worker {index} of {size} failed: {failed[index]}")
    return [got[index][1] for index in range(size)]


def _collect(crew: Crew, workers: list[Any], producers: int) -> dict[int, tuple[bool, Any]]:
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
                raise Violation(f"race did not finish within {CREW_TIMEOUT:.0f}s") from None
            continue
        got[index] = (ok, value)
        if producers and all(i in got for i in range(producers)):
            crew.stop.set()
    return got
