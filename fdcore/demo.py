"""``fdcore demo``: the main job on the embedded default, a local folder.

Starts three real ``fdcore agent run`` processes on one local-folder environment, submits a batch
of requests, and shows them being shared out and finished. Each table is written through the
fencing-token check, so the demo also shows that no table ever had two writers.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fdcore.fencing import fenced_write
from fdcore.mailbox import Mailbox
from fdcore.plugins import load_plugins
from fdcore.runners import TableJob
from fdcore.storage import Storage
from fdcore.views import queue_rows

AGENT_TOML = """\
[agent]
name = "{name}"
environment = "{environment}"
poll_seconds = 0.3
stale_after = 5
concurrency = 2
shutdown_grace = 30

[pipeline]
claim = "when_free"
take_over = true
grace_seconds = 2

[runner]
kind = "python"
function = "fdcore.demo:demo_table"
"""


@functools.cache
def _storage(url: str) -> Storage:
    return load_plugins().open_storage(url)


def demo_table(job: TableJob) -> None:
    """The demo's table: a short piece of work, then a fenced write of the table's output."""
    time.sleep(random.uniform(0.1, 0.6))
    payload = {"request": job.request, "agent": job.agent, "attempt": job.attempt}
    fenced_write(_storage(job.environment), job.table, job.fencing_token, payload)


def _summary(rows: list[Any]) -> Counter[str]:
    return Counter(row.state for row in rows)


def run_demo(folder: Path, agents: int, requests: int, tables: int, timeout: float) -> int:
    environment = folder.as_uri()
    storage = load_plugins().open_storage(environment)
    mailbox = Mailbox(storage)
    processes: list[subprocess.Popen[bytes]] = []
    print(f"environment: {environment}")
    for n in range(1, agents + 1):
        name = f"agent-{n}"
        config = folder / f"{name}.toml"
        config.write_text(AGENT_TOML.format(name=name, environment=environment))
        log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 (the agent process owns it)
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "fdcore.cli", "agent", "run", "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        print(f"started {name} (pid {processes[-1].pid}), log {folder / (name + '.log')}")

    from fdcore.commands import submit

    rng = random.Random(7)
    for n in range(requests):
        entities = rng.sample([f"table{t:02d}" for t in range(tables)], 2)
        submit(mailbox, entities, request_id=f"demo-{n:03d}", created_by="fdcore demo")
    print(f"submitted {requests} requests of 2 tables each over {tables} tables\n")

    started = time.monotonic()
    try:
        while True:
            rows = queue_rows(mailbox)
            counts = _summary(rows)
            by_agent = Counter(row.agent for row in rows if row.state == "succeeded")
            shares = "  ".join(f"{name}: {count}" for name, count in sorted(by_agent.items()))
            elapsed = time.monotonic() - started
            print(
                f"t={elapsed:4.1f}s  waiting {counts['waiting']:3d}  accepted "
                f"{counts['accepted']:3d}  running {counts['running']:3d}  succeeded "
                f"{counts['succeeded']:3d}  |  {shares}",
                flush=True,
            )
            if all(row.state not in ("waiting", "accepted", "running") for row in rows):
                break
            if elapsed > timeout:
                print(f"timed out after {timeout:.0f}s", file=sys.stderr)
                return 1
            time.sleep(1.0)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)

    return _report(mailbox, rows, [p.returncode for p in processes])


def _report(mailbox: Mailbox, rows: list[Any], exit_codes: list[int]) -> int:
    counts = _summary(rows)
    runs = [record for row in rows for record in mailbox.runs(row.id)]
    by_agent = Counter(row.agent for row in rows if row.state == "succeeded")
    outputs = [
        json.loads(blob.data)
        for key in mailbox.storage.list("tables/")
        if (blob := mailbox.storage.read(key)) is not None
    ]
    print()
    print(f"requests: {dict(counts)}")
    print("shared out: " + ", ".join(f"{a} {c}" for a, c in sorted(by_agent.items())))
    print(f"run log: {len(runs)} table runs; {len(outputs)} tables written with fencing tokens")
    print(f"agents stopped with exit codes {exit_codes}")
    ok = counts["succeeded"] == len(rows) and all(code == 0 for code in exit_codes)
    print("OK: every request succeeded exactly once" if ok else "NOT OK")
    return 0 if ok else 1


def _demo(args: argparse.Namespace) -> int:
    if args.dir:
        folder = Path(args.dir).absolute()
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.iterdir()):
            raise SystemExit(f"fdcore demo: --dir {folder} is not empty")
        return run_demo(folder, args.agents, args.requests, args.tables, args.timeout)
    with tempfile.TemporaryDirectory(prefix="fdcore-demo-") as temporary:
        return run_demo(Path(temporary), args.agents, args.requests, args.tables, args.timeout)


def register(commands: Any) -> None:
    parser = commands.add_parser("demo", help="run three agents sharing work on a local folder")
    parser.add_argument("--dir", help="an empty folder to use (default: a temporary one)")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.set_defaults(run=_demo)
