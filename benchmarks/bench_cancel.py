"""How long ``fdcore cancel`` takes to stop a running request, with a real agent process and
real table processes: from the cancel file's creation to the table process gone and to the
status ``cancelled`` (docs/benchmarks.md, "Cancelling a running request").

    .venv/bin/python benchmarks/bench_cancel.py [--poll 1.0] [--runs 6] [--ignore-term]

``--ignore-term``: the table process ignores SIGTERM, so the runner's SIGKILL after its 5 s
grace ends it. Each request has 5 tables; the first runs until cancelled, and the script checks
that no later table started. Cancels land at different points of the agent's poll cycle.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.submit import submit

TABLE = """
import os, signal, sys, time
if sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = os.path.join(sys.argv[1], os.environ["FDCORE_REQUEST"] + "." + os.environ["FDCORE_TABLE"])
with open(path, "w") as handle:
    handle.write(str(os.getpid()))
time.sleep(120)
"""


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie its parent has yet to reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def _written(path: Path) -> bool:
    return path.exists() and path.read_text() != ""


def _cancelled(mailbox: Mailbox, request_id: str) -> bool:
    found = mailbox.status(request_id)
    return found is not None and found.value.state is State.CANCELLED


def measure(poll: float, runs: int, ignore_term: bool) -> str:
    folder = Path(tempfile.mkdtemp(prefix="fdcore-bench-cancel-"))
    started = folder / "started"
    started.mkdir()
    (folder / "table.py").write_text(TABLE)
    fleet = AgentFleet(folder, (folder / "env").as_uri())
    fleet.env["FDCORE_RUNNER_STATE"] = str(folder / "runner-state")
    mode = "ignore-term" if ignore_term else "default"
    command = [sys.executable, str(folder / "table.py"), str(started), mode]
    agent = {"poll_seconds": poll, "stale_after": 10 * poll + 10, "concurrency": 1}
    fleet.add("etl-01", {"agent": agent, "runner": {"kind": "command", "command": command}})
    fleet.agents["etl-01"].start()
    mailbox = fleet.mailbox
    to_gone, to_status = [], []
    try:
        for n in range(runs):
            request_id = f"r{n}"
            submit(mailbox, ["t1", "t2", "t3", "t4", "t5"], request_id=request_id)
            first = started / f"{request_id}.t1"
            assert wait_until(functools.partial(_written, first), 30)
            pid = int(first.read_text())
            time.sleep(poll * 0.37 * (n % 3))  # land at different points of the poll cycle
            began = time.monotonic()
            now = datetime.now(timezone.utc)
            cancel_request(mailbox, request_id, by="bench", reason=None, now=now)
            assert wait_until(functools.partial(gone, pid), 60, 0.01)
            to_gone.append(time.monotonic() - began)
            assert wait_until(functools.partial(_cancelled, mailbox, request_id), 60, 0.01)
            to_status.append(time.monotonic() - began)
        time.sleep(2 * poll)
        later = sorted(p.name for p in started.iterdir() if not p.name.endswith(".t1"))
        assert later == [], f"later tables started: {later}"
    finally:
        fleet.stop_all()
    return (
        f"poll {poll:g} s, table {mode}, {runs} cancels: table process gone after "
        f"median {statistics.median(to_gone):.2f} s (max {max(to_gone):.2f}); status "
        f"cancelled after median {statistics.median(to_status):.2f} s (max {max(to_status):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poll", type=float, default=1.0, help="the agent's poll_seconds")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--ignore-term", action="store_true", help="tables ignore SIGTERM")
    args = parser.parse_args()
    print(measure(args.poll, args.runs, args.ignore_term))


if __name__ == "__main__":
    main()
