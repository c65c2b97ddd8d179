"""Submission to start on a store without a watch: how long a request waits for an idle agent.

    .venv/bin/python benchmarks/submit_to_start.py {s3,azurite} [--requests 20] [--before DIR]

One real ``fdcore agent run`` at the default settings (``poll_seconds = 5``, ``stale_after =
60``; python runner, the zero-work table of ``noop_tables.py``) idles on an environment of the S3
emulator (moto) or of Azurite, which this script starts; neither store has a watch, so every
request is found by a poll. ``--requests`` requests are submitted one at a time, each at a random
moment 5 to 12 s after the one before started, and each waits from just before its submission
(wall clock) to its table's start (the table's own wall clock, the same machine). ``--before``
runs the same beside it, at the same time on the same emulator, with another checkout's
``fdcore`` and storage plugin first on the agent's ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from bench_fleet import CONTAINER, RUNNER, Place, noop_fleet
from fdcore_onelake.testing import Azurite
from fdcore_s3.testing import S3Emulator

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.mailbox.submit import submit

PLUGIN = {"s3": "s3", "azurite": "onelake"}


def _started(folder: Path, request: str) -> float | None:
    """The wall-clock start of ``request``'s table, from noop_tables' log (None: not yet)."""
    for log in (folder / "tables").glob("*.jsonl"):
        for line in log.read_text().splitlines():
            run = json.loads(line)
            if run["request"] == request:
                return float(run["start"])
    return None


def measure(fleet: AgentFleet, folder: Path, requests: int, seed: int) -> list[float]:
    """Submission-to-start of ``requests`` requests, seconds, in submission order."""
    rng = random.Random(seed)
    waits = []
    for n in range(requests):
        time.sleep(rng.uniform(5.0, 12.0))
        request = f"wait-{seed}-{n:03d}"
        submitted = time.time()
        submit(fleet.mailbox, ["t"], request_id=request)
        assert wait_until(lambda: _started(folder, request) is not None, 60), request  # noqa: B023
        started = _started(folder, request)
        assert started is not None
        waits.append(started - submitted)
    return waits


def run(backend: str, requests: int, before: Path | None) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="fdcore-s2s-") as tmp:
        place = Place()
        if backend == "s3":
            place.s3 = stack.enter_context(S3Emulator())
            place.s3.create_bucket(CONTAINER)
        else:
            place.azurite = stack.enter_context(Azurite())
            place.azurite.create_container(CONTAINER)
        runs = [("fdcore", None), ("fdcore before", before)] if before else [("fdcore", None)]
        threads = []
        for seed, (name, checkout) in enumerate(runs):
            folder = Path(tmp) / f"run-{seed}"
            url, storage = place.environment(folder)
            fleet = noop_fleet(folder, url, storage)
            if checkout is not None:
                fleet.add_pythonpath(checkout, checkout / "plugins" / PLUGIN[backend])
            storage_handle = fleet.mailbox.storage  # opened here: the environment is made
            agent = fleet.add("idle-0", {"agent": {}, "runner": RUNNER}).start()
            stack.callback(fleet.kill_all)
            stack.callback(fleet.stop_all)
            written = lambda s=storage_handle: s.read("agents/idle-0.json") is not None  # noqa: E731
            assert wait_until(written, 60), agent.output()

            def one(name: str = name, fleet: AgentFleet = fleet, folder: Path = folder) -> None:
                time.sleep(15)  # a few idle polls first
                results[name] = measure(fleet, folder, requests, seed=7)

            threads.append(threading.Thread(target=one))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=sorted(PLUGIN))
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--before", type=Path, help="another checkout, run beside it")
    args = parser.parse_args(argv)
    for name, waits in run(args.backend, args.requests, args.before).items():
        print(
            f"{args.backend} {name}: {len(waits)} requests, submission to start "
            f"median {statistics.median(waits):.2f} s, max {max(waits):.2f} s "
            f"(poll_seconds 5): {', '.join(f'{w:.2f}' for w in waits)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
