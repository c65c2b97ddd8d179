"""How soon a SIGKILLed agent's requests run again elsewhere, with real agent and table processes
(docs/takeover.md, "Time to take over"; invariant 3).

    .venv/bin/python benchmarks/takeover_latency.py [--runs 5] [--baseline DIR] \
        [--lease-seconds S] [--taker-concurrency N] [--tables N --victim-table-seconds S]

Agent ``victim`` (concurrency 2) runs two requests, one table each, with ``command`` tables that
would run for a minute; agent ``taker`` (concurrency 2) is up and idle. The victim is SIGKILLed
(its table processes die with it) and the script times, from the kill, the start of each
request's table process on the taker. Settings as in issue 24's comparison: ``stale_after`` 2 s,
``grace_seconds`` 1 s, ``poll_seconds`` 0.1 s, ``take_over`` on; the bound is about
``stale_after + grace_seconds + poll_seconds`` = 3.1 s after the victim's last heartbeat (which
comes up to ``stale_after / 4`` before the kill).

``--baseline DIR``: also run the agents from the ``fdcore`` package under ``DIR`` (say, ``git
archive main fdcore | tar -x -C DIR``), alternating with this checkout's run by run, so the two
medians are measured side by side. The other options vary the case: a longer lease, a taker
with one worker, requests of many short tables (so kills land among acquisitions and releases).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import holder

STALE, GRACE, POLL = 2.0, 1.0, 0.1
AGENT = {"poll_seconds": POLL, "stale_after": STALE, "concurrency": 2, "shutdown_grace": 5}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": GRACE}
TABLE = """
import json, os, sys, time
line = {"agent": os.environ["FDCORE_AGENT"], "request": os.environ["FDCORE_REQUEST"],
        "started": time.time()}
with open(os.path.join(sys.argv[1], f"{os.getpid()}.json"), "w") as handle:
    handle.write(json.dumps(line))
time.sleep(float(os.environ["BENCH_TABLE_SECONDS"]))
"""


def starts(folder: Path) -> list[dict[str, object]]:
    return [json.loads(path.read_text() or "{}") for path in folder.glob("*.json")]


def one_run(
    folder: Path, pythonpath: str | None, options: argparse.Namespace
) -> tuple[float, float]:
    """Seconds from the kill to the first and to the last of the two tables starting again."""
    folder.mkdir()
    log = folder / "starts"
    log.mkdir()
    script = folder / "table.py"
    script.write_text(TABLE)
    fleet = AgentFleet(folder, (folder / "env").as_uri())
    if pythonpath:
        fleet.env["PYTHONPATH"] = pythonpath
    fleet.env["FDCORE_RUNNER_STATE"] = str(folder / "runner-state")
    runner = {"kind": "command", "command": [sys.executable, str(script), str(log)]}
    pipeline = dict(PIPELINE)
    if options.lease_seconds is not None:
        pipeline["lease_seconds"] = options.lease_seconds
    victim = fleet.add("victim", {"agent": AGENT, "pipeline": pipeline, "runner": runner})
    taking = {**AGENT, "concurrency": options.taker_concurrency}
    taker = fleet.add("taker", {"agent": taking, "pipeline": pipeline, "runner": runner})
    victim.env = {**fleet.env, "BENCH_TABLE_SECONDS": str(options.victim_table_seconds)}
    taker.env = {**fleet.env, "BENCH_TABLE_SECONDS": "0.2"}
    mailbox = fleet.mailbox
    try:
        tables = range(options.tables)
        submit(mailbox, [f"sales{n}" for n in tables], request_id="r1")
        submit(mailbox, [f"stock{n}" for n in tables], request_id="r2")
        victim.start()
        running = lambda: sum(s.get("agent") == "victim" for s in starts(log)) >= 2  # noqa: E731
        if not wait_until(running, 30) or {holder(mailbox, "r1"), holder(mailbox, "r2")} != {
            "victim"
        }:
            raise RuntimeError(f"the victim did not start both tables:\n{victim.output()}")
        taker.start()
        if not wait_until(lambda: mailbox.agent("taker") is not None, 30):
            raise RuntimeError(f"the taker did not start:\n{taker.output()}")
        time.sleep(random.uniform(1.0, 1.5))  # the taker is warm; kill at varied moments
        killed = time.time()
        victim.kill()
        again = lambda: {s.get("request") for s in starts(log) if s.get("agent") == "taker"}  # noqa: E731
        if not wait_until(lambda: again() == {"r1", "r2"}, 60, interval=0.02):
            raise RuntimeError(f"the taker did not run both again:\n{taker.output()}")
        times = sorted(
            float(s["started"]) - killed  # type: ignore[arg-type]
            for s in starts(log)
            if s.get("agent") == "taker"
        )
        return times[0], times[-1]
    finally:
        fleet.stop_all()
        fleet.kill_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lease-seconds", type=float, help="[pipeline] lease_seconds")
    parser.add_argument("--taker-concurrency", type=int, default=2)
    parser.add_argument("--tables", type=int, default=1, help="tables per request")
    parser.add_argument(
        "--victim-table-seconds", type=float, default=60.0, help="how long the victim's run"
    )
    parser.add_argument("--baseline", help="a folder holding another fdcore package to compare")
    args = parser.parse_args()
    labels = {"this checkout": None}
    if args.baseline:
        baseline = str(Path(args.baseline).resolve())
        labels = {"baseline": baseline, **labels}
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in labels}
    root = Path(tempfile.mkdtemp(prefix="fdcore-bench-takeover-"))
    os.chdir(root)  # agents import fdcore from PYTHONPATH or the install, not from a checkout here
    for run in range(args.runs):
        for label, pythonpath in labels.items():
            first, last = one_run(
                root / f"{run}-{len(results[label])}-{label[:4]}", pythonpath, args
            )
            results[label].append((first, last))
            print(f"run {run + 1} {label}: first {first:.2f} s, last {last:.2f} s", flush=True)
    bound = STALE + GRACE + POLL
    for label, times in results.items():
        firsts = statistics.median(t[0] for t in times)
        lasts = statistics.median(t[1] for t in times)
        print(
            f"{label}: median of {len(times)} runs, from the SIGKILL to the table running again"
            f" elsewhere: first {firsts:.2f} s, both {lasts:.2f} s (bound about {bound:.1f} s)"
        )
    os.chdir(tempfile.gettempdir())
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
