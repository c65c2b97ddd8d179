"""Wake-ups that follow events: idle CPU, the shared-table drain, the gap between two tables.

    .venv/bin/python benchmarks/wakeups.py idle [--seconds 60] [--runs 3] [--before OLD]
    .venv/bin/python benchmarks/wakeups.py shared [--requests 300] [--runs 3] [--before OLD]
    .venv/bin/python benchmarks/wakeups.py gap [--requests 100] [--runs 3] [--before OLD]

Every figure is measured on a local folder, with real ``fdcore agent run`` processes (python
runner, the zero-work table of ``noop_tables.py``). ``--before DIR`` runs the same beside it on
another checkout's ``fdcore`` and ``fdcore_localfs`` (its folder and ``plugins/localfs`` put first
on the agents' ``PYTHONPATH``), in the same run: side by side for ``idle``, round-robin for the
others. Figures are medians over ``--runs``.

- ``idle``: 3 agents at the default settings on one environment and, at the same time, a huey
  consumer with 3 worker processes (``SqliteHuey``, ``huey_idle.py``), all idle for
  ``--seconds`` after 30 s of start-up; the CPU each group used (every thread of the process
  and its children, ``/proc/.../schedstat``) as a share of one core per process (agent, or huey
  worker), and its threads' wake-ups (context switches) per second per process.
- ``shared``: 3 agents (concurrency 2, ``claim = "when_free"``) drain ``--requests`` queued
  requests that all name tables ``a`` and ``b``, at the default poll (5 s) and at poll 0.01: the
  drain's time (first table's start to last table's end) and the longest stretch in which no
  table ran anywhere.
- ``gap``: 1 agent at the default settings drains ``--requests`` queued requests of two tables
  of their own; the gap is a request's second table's start minus its first table's end. Beside
  it, on the same folder and while the agent drains, the store's time for the writes a gap makes
  (the status's ``tables_done``, the run record, the lease release, the next table's fence and
  lease), each sequence timed whole from one client of the benchmark's own, over and over.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from bench_fleet import HERE, RUNNER, Place, _fleet, drain_fleet, noop_fleet

from fdcore.cli.fleet import AgentFleet
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins


def _use_checkout(fleet: AgentFleet, checkout: Path | None) -> None:
    if checkout is not None:
        fleet.add_pythonpath(checkout, checkout / "plugins" / "localfs")


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        found.append(current := pending.pop())
        pending.extend(children.get(current, []))
    return found


def _cpu_and_wakeups(pid: int) -> tuple[float, int]:
    """CPU seconds and context switches of every thread of ``pid``'s process tree so far (the
    scheduler's nanoseconds, ``/proc/.../schedstat``, not 10 ms ticks)."""
    cpu, switches = 0.0, 0
    for process in _tree(pid):
        for task in Path(f"/proc/{process}/task").glob("*"):
            try:
                cpu += int((task / "schedstat").read_text().split()[0]) / 1e9
                for line in (task / "status").read_text().splitlines():
                    if "ctxt_switches:" in line:
                        switches += int(line.split()[-1])
            except OSError:
                continue  # ended meanwhile
    return cpu, switches


def idle_once(seconds: float, before: Path | None) -> dict[str, dict[str, float]]:
    """Each group's CPU (% of a core per process) and wake-ups per second per process, idle."""
    with tempfile.TemporaryDirectory(prefix="fdcore-wakeups-") as tmp:
        folder = Path(tmp)
        groups: dict[str, tuple[list[int], int]] = {}  # name: root pids, processes in it
        fleets = []
        for name, checkout in [("fdcore", None), ("fdcore before", before)]:
            if name == "fdcore before" and before is None:
                continue
            fleet = noop_fleet(folder / name, str(folder / name / "env"))
            _use_checkout(fleet, checkout)
            for n in range(3):
                fleet.add(f"idle-{n}", {"agent": {}, "runner": RUNNER})  # the defaults
            fleets.append(fleet)
            groups[name] = ([agent.start().pid for agent in fleet], 3)
        env = {**os.environ, "FDCORE_BENCH_HUEY_DB": str(folder / "huey.db")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        consumer = str(Path(sys.executable).parent / "huey_consumer")
        with open(folder / "huey.log", "wb") as log:
            huey = subprocess.Popen(
                [consumer, "huey_idle.huey", "-w", "3", "-k", "process"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        groups["huey"] = ([huey.pid], 3)
        try:
            time.sleep(30)  # start-up: imports, first polls, workers forked (a loaded machine)
            start = {
                name: [_cpu_and_wakeups(pid) for pid in pids] for name, (pids, _) in groups.items()
            }
            began = time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - began
            result = {}
            for name, (pids, count) in groups.items():
                ends = [_cpu_and_wakeups(pid) for pid in pids]
                cpu = sum(end[0] - first[0] for end, first in zip(ends, start[name], strict=True))
                woken = sum(end[1] - first[1] for end, first in zip(ends, start[name], strict=True))
                result[name] = {
                    "cpu_percent_per_process": 100 * cpu / elapsed / count,
                    "wakeups_per_s_per_process": woken / elapsed / count,
                }
        finally:
            huey.terminate()
            huey.wait(30)
            for fleet in fleets:
                fleet.stop_all()
                fleet.kill_all()
    return result


def shared_once(poll: float, requests: int, checkout: Path | None) -> dict[str, float]:
    """3 agents draining requests that all name tables a and b: time, longest stretch idle."""
    with tempfile.TemporaryDirectory(prefix="fdcore-wakeups-") as tmp:
        folder = Path(tmp)
        fleet = _fleet(folder, poll, Place(), None)
        _use_checkout(fleet, checkout)
        for n in range(requests):
            submit(fleet.mailbox, ["a", "b"], request_id=f"shared-{n:05d}")
        runs = drain_fleet(fleet, 2 * requests, f"poll {poll}")
    runs.sort(key=lambda run: run["start"])
    longest, ended = 0.0, runs[0]["end"]
    for run in runs[1:]:
        longest = max(longest, run["start"] - ended)
        ended = max(ended, run["end"])
    return {"drain_s": ended - runs[0]["start"], "longest_idle_s": longest}


def gap_once(requests: int, checkout: Path | None) -> dict[str, float]:
    """1 default agent: the median gap between a request's two tables, and the median time of
    the writes a gap makes, timed on the same folder while the agent drains."""
    with tempfile.TemporaryDirectory(prefix="fdcore-wakeups-") as tmp:
        folder = Path(tmp)
        env = folder / "env"
        fleet = noop_fleet(folder, str(env))
        _use_checkout(fleet, checkout)
        fleet.add("gap-0", {"agent": {}, "runner": RUNNER})
        for n in range(requests):
            submit(fleet.mailbox, [f"t{n}-a", f"t{n}-b"], request_id=f"gap-{n:05d}")
        draining = threading.Event()
        writes: list[float] = []
        sampler = threading.Thread(target=_time_gap_writes, args=(str(env), draining, writes))
        draining.set()
        sampler.start()
        try:
            runs = drain_fleet(fleet, 2 * requests, "gap")
        finally:
            draining.clear()
            sampler.join()
    tables = {(run["request"], run["table"]): run for run in runs}
    gaps = [
        tables[(f"gap-{n:05d}", f"t{n}-b")]["start"] - tables[(f"gap-{n:05d}", f"t{n}-a")]["end"]
        for n in range(requests)
    ]
    gap, write = statistics.median(gaps), statistics.median(writes)
    return {"gap_ms": 1000 * gap, "writes_ms": 1000 * write, "ratio": gap / write}


# A gap's writes, with files of about the sizes the agent writes (status, run record, lease).
STATUS, RECORD, LEASE = (b"{" + b" " * size + b"}" for size in (700, 400, 300))


def _time_gap_writes(url: str, draining: threading.Event, times: list[float]) -> None:
    """While ``draining``: the five writes of one gap, timed whole, then a pause as long."""
    storage = load_plugins().open_storage(url, {})
    n = 0
    while draining.is_set():
        status_etag = storage.create(f"status/w-{n:05d}.json", STATUS)
        lease_etag = storage.create(f"leases/w{n}-a.json", LEASE)
        started = time.perf_counter()
        storage.replace(f"status/w-{n:05d}.json", STATUS, status_etag)  # tables_done
        storage.create(f"runs/w-{n:05d}/1/w{n}-a.json", RECORD)  # the run record
        storage.replace(f"leases/w{n}-a.json", LEASE, lease_etag)  # the release
        storage.create(f"fences/w{n}-b.json", LEASE)  # the next table's fence
        storage.create(f"leases/w{n}-b.json", LEASE)  # and lease
        times.append(time.perf_counter() - started)
        time.sleep(times[-1])  # the disk is shared with the agent: half the time each
        n += 1
    storage.close()


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def _round_robin(
    runs: int, variants: dict[str, Callable[[], dict[str, float]]]
) -> dict[str, dict[str, float]]:
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for run in range(runs):
        for name, measure in variants.items():
            samples[name].append(measure())
            print(f"run {run + 1} {name}: {samples[name][-1]}", flush=True)
    return {name: _medians(found) for name, found in samples.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["idle", "shared", "gap"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0, help="idle: the window")
    parser.add_argument("--requests", type=int, help="shared: 300, gap: 100")
    parser.add_argument("--before", type=Path, help="the same on this checkout, side by side")
    args = parser.parse_args(argv)
    checkouts = {"after": None, **({"before": args.before} if args.before else {})}
    if args.what == "idle":
        samples = [idle_once(args.seconds, args.before) for _ in range(args.runs)]
        for run, sample in enumerate(samples):
            print(f"run {run + 1}: {sample}", flush=True)
        for name in samples[0]:
            print(f"{name}: {_medians([sample[name] for sample in samples])}")
        return
    variants: dict[str, Callable[[], dict[str, float]]] = {}
    requests = args.requests or (300 if args.what == "shared" else 100)
    for label, checkout in checkouts.items():
        if args.what == "shared":
            for poll in (5.0, 0.01):
                variants[f"{label} poll {poll}"] = partial(shared_once, poll, requests, checkout)
        else:
            variants[label] = partial(gap_once, requests, checkout)
    for name, figures in _round_robin(args.runs, variants).items():
        print(f"{name}: {figures}")


if __name__ == "__main__":
    main()
