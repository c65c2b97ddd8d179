"""Store writes per request of real agent processes on a local folder, counted by the kernel.

    .venv/bin/python benchmarks/bench_writes.py [--requests 60] [--agents 3] [--idle 60]

``--agents`` real ``fdcore agent run`` processes with the default settings (poll 5 s,
stale_after 60 s, concurrency 1, ``claim = "always"``; the python runner's zero-work table of
``noop_tables.py``) drain ``--requests`` one-table requests queued before they start (a table of
their own each), then idle for ``--idle`` seconds. Every write the agents make to the mailbox
is counted with inotify, no tracing and no change to the agents: each lands as a new name in
its folder (the local store links a create into place and renames a replace over the old file),
``IN_CREATE`` or ``IN_MOVED_TO``; run records are counted as the files they leave. Prints the
writes per completed request by folder (agents/ left out) and the agent-record writes per
agent-hour while idle. ``--pythonpath DIR`` runs the agents on another checkout's ``fdcore``
(the before figure). Results: docs/benchmarks.md, "Writes per request".
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import os
import select
import struct
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit

HERE = Path(__file__).resolve().parent
RUNNER = {"kind": "python", "function": "noop_tables:noop"}
WATCHED = ("agents", "status", "leases", "fences")
IN_CREATE, IN_MOVED_TO, IN_Q_OVERFLOW = 0x100, 0x80, 0x4000
EVENT = struct.Struct("iIII")


class FolderWrites:
    """Counts the names that appear in each watched folder (inotify, on a thread)."""

    def __init__(self, root: Path) -> None:
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.folders: dict[int, str] = {}
        for name in WATCHED:
            (root / name).mkdir(parents=True, exist_ok=True)
            path = str(root / name).encode()
            wd = self.libc.inotify_add_watch(self.fd, path, IN_CREATE | IN_MOVED_TO)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {name}")
            self.folders[wd] = name
        self.counts: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            with contextlib.suppress(BlockingIOError):
                data = os.read(self.fd, 1 << 20)
                offset = 0
                while offset < len(data):
                    wd, mask, _cookie, length = EVENT.unpack_from(data, offset)
                    offset += EVENT.size + length
                    if mask & IN_Q_OVERFLOW:
                        raise SystemExit("inotify queue overflowed: counts would be short")
                    self.counts[self.folders[wd]] += 1

    def snapshot(self) -> Counter[str]:
        time.sleep(0.5)  # let the reader drain what is queued
        return Counter(self.counts)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        os.close(self.fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--claim", default="always", help="the claim policy (default: always)")
    parser.add_argument("--pythonpath", type=Path, help="run the agents on this fdcore checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fdcore-writes-") as tmp:
        folder = Path(tmp)
        (folder / "tables").mkdir()
        env = folder / "env"
        fleet = AgentFleet(folder, str(env), {})
        fleet.add_pythonpath(HERE)
        if args.pythonpath is not None:
            fleet.add_pythonpath(args.pythonpath)
        fleet.env["FDCORE_BENCH_LOG"] = str(folder / "tables")
        for n in range(args.agents):
            sections = {"agent": {}, "pipeline": {"claim": args.claim}, "runner": RUNNER}
            fleet.add(f"writes-{n}", sections)
        ids = [f"w-{n:05d}" for n in range(args.requests)]
        for request_id in ids:
            submit(fleet.mailbox, [f"t-{request_id}"], request_id=request_id)
        writes = FolderWrites(env)
        try:
            for agent in fleet:
                agent.start()

            def drained() -> bool:
                found = [fleet.mailbox.status(r) for r in ids]
                return all(f is not None and f.value.state is State.SUCCEEDED for f in found)

            if not wait_until(drained, 1800, 0.2):
                raise SystemExit(f"the fleet did not drain {args.requests} requests")
            busy = writes.snapshot()
            time.sleep(args.idle)
            idle = writes.snapshot() - busy
        finally:
            fleet.stop_all()
            fleet.kill_all()
            writes.close()
        runs = sum(1 for _ in (env / "runs").rglob("*.json"))
    per_request = {name: busy[name] / args.requests for name in WATCHED if name != "agents"}
    per_request["runs"] = runs / args.requests
    total = sum(per_request.values())
    print(
        f"{args.agents} agents (claim {args.claim}), {args.requests} one-table requests: "
        f"{total:.2f} store writes per completed request ("
        + ", ".join(f"{name}/ {value:.2f}" for name, value in per_request.items())
        + ")"
    )
    hours = args.agents * args.idle / 3600
    print(
        f"idle {args.idle:.0f} s: {idle['agents'] / hours:.0f} agent-record writes per agent-hour "
        f"({idle['agents']} writes); other writes while idle: "
        f"{sum(n for name, n in idle.items() if name != 'agents')}"
    )


if __name__ == "__main__":
    main()
