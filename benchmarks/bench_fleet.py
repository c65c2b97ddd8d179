"""Real agent processes draining queued work, waking for new work and for a 1 s schedule.

    .venv/bin/python benchmarks/bench_fleet.py drain --poll 5 0.01 --runs 3
    .venv/bin/python benchmarks/bench_fleet.py schedule --poll 5 --seconds 60

``drain``: 3 agents x concurrency 2 on a local folder (python runner, the zero-work table of
``noop_tables.py``) drain ``--requests`` queued requests of 2 tables each (tables of their own,
so no two requests wait for one table's lease), then, with the fleet idle, one request at a time
is submitted and timed to its first table's start. The poll values of one invocation run
round-robin, so a noisy neighbour on the machine hits them alike; figures are medians over runs.

- requests/s: requests over the time from the first table's start to the last table's end
  (agent start-up, about a second of imports, is left out);
- gap: in each request, its second table's start minus its first table's end;
- idle start: a request submitted to an idle fleet, from the submit to its first table's start.

``schedule``: 3 agents share an ``every = "1s"`` schedule for ``--seconds``; reports the slots
due in that window, the slots that ran, and any slot that ran twice.

``--azurite`` runs the same on the OneLake backend against a local Azurite, ``--s3`` on the S3
backend against moto's S3 server (fdcore_s3.testing). A drain also counts the tables that ran
more than once (it must be 0). Every invocation
first prints the backend's raw conditional creates per second (one client, one after another):
divided by the writes a request costs, that is the ceiling a fleet's requests/s is compared
with. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import attrs
from fdcore_onelake.testing import Azurite
from fdcore_s3.testing import S3Emulator, credentials_environment

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins

HERE = Path(__file__).resolve().parent
RUNNER = {"kind": "python", "function": "noop_tables:noop"}
CONTAINER = "bench"
SECRET_VARIABLE = "FDCORE_BENCH_AZURITE_CONNECTION"


@attrs.define
class Place:
    """Where the fleet's environments go: a new local folder, or folders on one emulator."""

    azurite: Azurite | None = None
    s3: S3Emulator | None = None

    def environment(self, folder: Path) -> tuple[str, dict[str, str]]:
        """A new environment's URL and the agents' [storage] options."""
        if self.s3 is not None:
            os.environ.update(credentials_environment())  # boto3's chain, as agents read it
            return self.s3.url(CONTAINER, f"bench-{uuid.uuid4().hex[:12]}"), self.s3.options
        if self.azurite is None:
            return str(folder / "env"), {}
        os.environ[SECRET_VARIABLE] = self.azurite.connection_string
        url = self.azurite.url(CONTAINER, f"bench-{uuid.uuid4().hex[:12]}")
        return url, {"connection_string_env": SECRET_VARIABLE}


def noop_fleet(folder: Path, url: str, storage: dict[str, str] | None = None) -> AgentFleet:
    """A fleet (no agents yet) whose agents can run ``noop_tables``' tables, which log their
    runs under ``folder/tables`` (read back with :func:`_runs`)."""
    (folder / "tables").mkdir(parents=True, exist_ok=True)
    fleet = AgentFleet(folder, url, storage or {})
    fleet.add_pythonpath(HERE)
    fleet.env["FDCORE_BENCH_LOG"] = str(folder / "tables")
    return fleet


def drain_fleet(fleet: AgentFleet, tables: int, what: str) -> list[dict[str, Any]]:
    """Start the fleet's agents, wait until ``tables`` table runs are logged, stop them; the runs.
    Stops the benchmark if they did not drain in 30 minutes or ran more or fewer tables."""
    try:
        for agent in fleet:
            agent.start()
        if not wait_until(lambda: len(_runs(fleet.folder)) >= tables, 1800, 0.05):
            raise SystemExit(f"{what}: did not drain in 30 min")
    finally:
        fleet.stop_all()
        fleet.kill_all()
    runs = _runs(fleet.folder)
    if len(runs) != tables:
        raise SystemExit(f"{what}: {len(runs)} table runs, not {tables}")
    return runs


def _fleet(folder: Path, poll: float, place: Place, schedule: dict[str, Any] | None) -> AgentFleet:
    url, storage = place.environment(folder)
    fleet = noop_fleet(folder, url, storage)
    agent = {"poll_seconds": poll, "concurrency": 2, "stale_after": 30, "shutdown_grace": 20}
    for n in range(3):
        sections: dict[str, Any] = {"agent": agent, "pipeline": {"claim": "when_free"}}
        sections["runner"] = RUNNER
        if schedule is not None:
            sections["schedules"] = [schedule]
        fleet.add(f"bench-{n}", sections)
    return fleet


def _runs(folder: Path) -> list[dict[str, Any]]:
    lines = []
    for path in (folder / "tables").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.endswith("}"):
                lines.append(json.loads(line))
    return lines


def drain_once(poll: float, requests: int, idle_samples: int, place: Place) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        folder = Path(tmp)
        fleet = _fleet(folder, poll, place, None)
        for n in range(requests):
            submit(fleet.mailbox, [f"t{n}-a", f"t{n}-b"], request_id=f"bench-{n:05d}")
        try:
            for agent in fleet:
                agent.start()
            if not wait_until(lambda: len(_runs(folder)) >= 2 * requests, 3600, 0.05):
                raise SystemExit(f"poll {poll}: the fleet did not drain {requests} requests")
            runs = _runs(folder)
            twice = sum(n > 1 for n in Counter((r["request"], r["table"]) for r in runs).values())
            if len(runs) != 2 * requests or twice:
                raise SystemExit(
                    f"poll {poll}: {len(runs)} table runs, not {2 * requests}; {twice} ran twice"
                )
            span = max(r["end"] for r in runs) - min(r["start"] for r in runs)
            by_request: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
            for run in runs:
                by_request[run["request"]][run["table"]] = run
            gaps = [
                tables[f"t{n}-b"]["start"] - tables[f"t{n}-a"]["end"]
                for n in range(requests)
                if len(tables := by_request[f"bench-{n:05d}"]) == 2
            ]
            starts = []
            for n in range(idle_samples):
                time.sleep(1.5)  # idle: every agent has polled at least once with nothing to do
                request = f"idle-{n}"
                submitted = time.time()
                submit(fleet.mailbox, [f"idle-{n}"], request_id=request)

                def started(request: str = request) -> bool:
                    return any(r["request"] == request for r in _runs(folder))

                wait_until(started, 3 * poll + 30, 0.01)
                first = min(r["start"] for r in _runs(folder) if r["request"] == request)
                starts.append(first - submitted)
        finally:
            fleet.stop_all()
            fleet.kill_all()
    return {
        "ran_twice": float(twice),
        "requests_per_s": requests / span,
        "span_s": span,
        "gap_median_ms": 1000 * statistics.median(gaps),
        "gap_p90_ms": 1000 * statistics.quantiles(gaps, n=10)[-1],
        "idle_start_median_s": statistics.median(starts) if starts else float("nan"),
        "idle_start_max_s": max(starts) if starts else float("nan"),
    }


def schedule_once(poll: float, seconds: float, place: Place) -> dict[str, float]:
    schedule = {"id": "tick", "shared": True, "entities": ["tick"], "every": "1s"}
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        folder = Path(tmp)
        fleet = _fleet(folder, poll, place, schedule)
        try:
            for agent in fleet:
                agent.start()
            time.sleep(3)  # start-up: imports, first polls
            window_start = time.time()
            time.sleep(seconds)
            window_end = time.time()
            time.sleep(3)  # the window's last slots finish
        finally:
            fleet.stop_all()
            fleet.kill_all()
        runs = _runs(folder)
    # Slot ids of "every" schedules are the due time in epoch seconds.
    slots = Counter(int(r["request"].split("-")[2]) for r in runs)
    due = range(int(window_start) + 1, int(window_end) + 1)
    return {
        "due": len(due),
        "ran": sum(1 for slot in due if slots[slot] >= 1),
        "missed": sum(1 for slot in due if slots[slot] == 0),
        "doubled": sum(1 for slot in due if slots[slot] > 1),
    }


def creates_per_second(place: Place, count: int = 300) -> float:
    """The backend's raw rate of conditional creates, one after another from one client."""
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        url, options = place.environment(Path(tmp))
        storage = load_plugins().open_storage(url, options)
        started = time.perf_counter()
        for n in range(count):
            storage.create(f"bench/{n:05d}.json", b'{"n": %d}' % n)
        elapsed = time.perf_counter() - started
        storage.close()
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["drain", "schedule"])
    parser.add_argument("--poll", type=float, nargs="+", default=[5.0, 0.01])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--idle-samples", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--azurite", action="store_true", help="on Azurite, not a local folder")
    parser.add_argument("--s3", action="store_true", help="on moto's S3 server (fdcore-s3)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        place = Place()
        if args.azurite:
            place.azurite = stack.enter_context(Azurite())
            place.azurite.create_container(CONTAINER)
        elif args.s3:
            place.s3 = stack.enter_context(S3Emulator())
            place.s3.create_bucket(CONTAINER)
        print(f"conditional creates/s, one client: {creates_per_second(place):.0f}", flush=True)
        _run(args, place)


def _run(args: argparse.Namespace, place: Place) -> None:
    results: dict[float, list[dict[str, float]]] = defaultdict(list)
    for run in range(args.runs):
        for poll in args.poll:
            if args.what == "drain":
                figures = drain_once(poll, args.requests, args.idle_samples, place)
            else:
                figures = schedule_once(poll, args.seconds, place)
            results[poll].append(figures)
            shown = ", ".join(f"{key}={value:.3g}" for key, value in figures.items())
            print(f"run {run + 1} poll_seconds={poll}: {shown}", flush=True)
    print("medians:")
    for poll, rows in results.items():
        medians = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"  poll_seconds={poll}: " + ", ".join(f"{k}={v:.3g}" for k, v in medians.items()))


if __name__ == "__main__":
    main()
