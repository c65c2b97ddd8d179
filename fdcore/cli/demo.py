"""``fdcore demo``: the main job on the embedded default, a local folder.

Starts three real ``fdcore agent run`` processes on one local-folder environment that share a
5-second schedule, submits a batch of requests, kills one agent with SIGKILL once it runs a
request and brings it back once all it held was taken over, and shows the work being shared out,
taken over and finished; each slot that did not run is explained. Each table is written through
the fencing-token check.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fdcore.abc import Storage, TableJob, TableLeases
from fdcore.cli.fleet import AgentFleet, AgentProcess
from fdcore.contract.models import Outcome
from fdcore.environment import QueueRow
from fdcore.environment.queue import queue_rows
from fdcore.errors import ConfigError
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.fencing import fenced_write
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import COMMAND, LEASES, load_plugins
from fdcore.settings.checks import Seconds, Whole, add_flag
from fdcore.terminal import LiveView

SECTIONS: dict[str, Any] = {
    "agent": {"poll_seconds": 0.3, "stale_after": 3, "concurrency": 2, "shutdown_grace": 30},
    "pipeline": {"claim": "when_free", "take_over": True, "grace_seconds": 1},
    "runner": {"kind": "python", "function": "fdcore.cli.demo:demo_table"},
    "schedules": [{"id": "summary", "shared": True, "entities": ["summary"], "every": "5s"}],
}
UNFINISHED = ("waiting", "accepted", "running")


@functools.cache
def _storage(url: str) -> Storage:
    return load_plugins().open_storage(url, create=False)  # the fleet made it


@functools.cache
def _leases(url: str, provider: str) -> TableLeases:
    return load_plugins().get(LEASES, provider).open(_storage(url), {})


def demo_table(job: TableJob) -> None:
    """The demo's table: a short piece of work, then a fenced write of the table's output."""
    time.sleep(random.uniform(0.2, 0.8))
    payload = {"request": job.request, "agent": job.agent, "attempt": job.attempt}
    storage = _storage(job.environment)
    leases = _leases(job.environment, job.leases)
    fenced_write(storage, leases, job.table, job.fencing_token, payload)


def _progress(rows: list[QueueRow], elapsed: float) -> str:
    counts = Counter(row.state for row in rows)
    done = Counter(row.agent for row in rows if row.state == "succeeded")
    shares = "  ".join(f"{name}: {count}" for name, count in sorted(done.items()))
    return (
        f"t={elapsed:4.1f}s  waiting {counts['waiting']:3d}  running "
        f"{counts['running'] + counts['accepted']:3d}  succeeded {counts['succeeded']:3d}  |  "
        f"{shares}"
    )


def _has_monitor() -> bool:
    """Whether ``fdcore monitor`` is installed (the fdcore-monitor plugin's command)."""
    return "monitor" in load_plugins().implementations(COMMAND)


def _start_monitor(fleet: AgentFleet, port: int) -> subprocess.Popen[str]:
    """``fdcore monitor`` on the demo's environment, as a process of its own, once it printed the
    address to open (shown here). The demo names the command, never imports the plugin."""
    # the fleet's mailbox creates the environment: the monitor opens one, never creates it
    environment = fleet.mailbox.storage.url
    command = [sys.executable, "-m", "fdcore.cli", "monitor", "--env", environment]
    command += ["--port", str(port)]
    watcher = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert watcher.stdout is not None
    for line in watcher.stdout:  # its few lines, up to the last; its errors go to stderr
        print(line, end="", flush=True)
        if line.startswith("Prometheus metrics:"):
            break
    watcher.stdout.close()  # it prints nothing more
    return watcher


def run_demo(
    folder: Path,
    agents: int,
    requests: int,
    tables: int,
    timeout: float,
    monitor: int | None = None,
) -> int:
    """The demo on a new environment in ``folder``; with ``monitor`` (a port), ``fdcore monitor``
    serves it there while it runs."""
    environment = (folder / "environment").as_uri()
    fleet = AgentFleet(folder, environment)
    print(f"environment: {environment}")
    if monitor is None:
        if _has_monitor():
            print(f"watch it in a browser while it runs: fdcore monitor --env {environment}")
        return _share_work(fleet, agents, requests, tables, timeout)
    watcher = _start_monitor(fleet, monitor)
    try:
        return _share_work(fleet, agents, requests, tables, timeout)
    finally:
        _stop_monitor(watcher)


def _share_work(fleet: AgentFleet, agents: int, requests: int, tables: int, timeout: float) -> int:
    """Start the agents, submit the requests, kill and restart one agent, report."""
    mailbox = fleet.mailbox
    for n in range(1, agents + 1):
        agent = fleet.add(f"agent-{n}", SECTIONS).start()
        print(f"started {agent.name} (pid {agent.pid}), log {agent.log}")

    rng = random.Random(7)
    for n in range(requests):
        entities = rng.sample([f"table{t:02d}" for t in range(tables)], 2)
        submit(mailbox, entities, request_id=f"demo-{n:03d}", created_by="fdcore demo")
    print(f"submitted {requests} requests of 2 tables each over {tables} tables;")
    print("the agents also share a schedule due every 5 s (one request per slot)\n")

    victim = fleet.agents["agent-2"] if agents > 1 else None
    killed = restarted = False
    held: set[str] = set()  # what the victim held when killed: to be taken over
    started = time.monotonic()
    live = LiveView()  # on a terminal the progress line is redrawn in place
    try:
        while True:
            elapsed = time.monotonic() - started
            rows = queue_rows(mailbox)
            live.show(_progress(rows, elapsed))
            died = _exited(fleet, victim if killed and not restarted else None)
            if died:
                print(f"\n{died}; stopping the demo", file=sys.stderr)
                return 1
            if victim is not None and not killed:
                # killed once it runs work, whenever that is on this machine: its work moves
                held = _held(rows, victim.name, ("running",))
                if held:
                    victim.kill()
                    killed = True
                    live.note(
                        f"--- killed {victim.name} with SIGKILL while it ran {len(held)} "
                        "requests: they will be taken over"
                    )
            elif victim is not None and not restarted and not _held(rows, victim.name) & held:
                victim.start()  # back once nothing it held is its own any more
                restarted = True
                live.note(f"--- restarted {victim.name}: every request it held was taken over")
            submitted = [row for row in rows if row.schedule is None]
            if elapsed > 15 and all(row.state not in UNFINISHED for row in submitted):
                break
            if elapsed > timeout:
                print(f"timed out after {timeout:.0f}s", file=sys.stderr)
                return 1
            time.sleep(1.0)
    finally:
        codes = fleet.stop_all()
    return _report(mailbox, queue_rows(mailbox), codes)


def _held(rows: list[QueueRow], agent: str, states: tuple[str, ...] = UNFINISHED) -> set[str]:
    """The requests ``agent`` holds in one of ``states``."""
    return {row.id for row in rows if row.agent == agent and row.state in states}


def _exited(fleet: AgentFleet, killed: AgentProcess | None) -> str | None:
    """Why an agent the demo did not kill has exited (its exit code and its log's last line: a
    start-up error is one line), or None while every such agent runs."""
    for agent in fleet:
        if agent is killed or agent.alive():
            continue
        lines = agent.output().strip().splitlines()
        reason = lines[-1] if lines else "no output"
        return f"{agent.name} exited with code {agent.wait(0)}: {reason}"
    return None


def _stop_monitor(watcher: subprocess.Popen[str]) -> None:
    """On a terminal, the monitor stays up to look around until Enter; then it stops."""
    if sys.stdin.isatty() and watcher.poll() is None:
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("the monitor is still up: press Enter to stop it ")
    watcher.terminate()
    try:
        watcher.wait(10)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()


def _report(mailbox: Mailbox, rows: list[QueueRow], codes: dict[str, int]) -> int:
    submitted = [row for row in rows if row.schedule is None]
    scheduled = [row for row in rows if row.schedule is not None]
    runs = [record for row in rows for record in mailbox.runs(row.id)]
    done = Counter(row.agent for row in submitted if row.state == "succeeded")
    moved = [row for row in rows if any(a.outcome == "lost" for a in row.attempts)]
    twice = [
        (row.id, table)
        for row in rows
        for table, count in Counter(
            r.table for r in mailbox.runs(row.id) if r.outcome is Outcome.SUCCEEDED
        ).items()
        if count > 1
    ]
    print()
    print(f"submitted requests: {dict(Counter(row.state for row in submitted))}")
    print("shared out: " + ", ".join(f"{a} {c}" for a, c in sorted(done.items())))
    print(
        f"schedule 'summary': {len(scheduled)} slots, one request each: "
        f"{dict(Counter(row.state for row in scheduled))}"
    )
    for row in scheduled:
        if row.state != "succeeded":
            print(f"  slot {row.slot}: {_why_not_run(row, submitted, mailbox)}")
    print(f"taken over from a lost agent: {len(moved)} requests")
    print(f"run log: {len(runs)} table runs; tables that succeeded twice: {len(twice)}")
    print(f"agents stopped with exit codes {codes}")
    problems = []
    if not all(row.state == "succeeded" for row in submitted):
        problems.append("a submitted request did not succeed")
    if not moved:
        problems.append("no request was taken over")
    if twice:
        problems.append("a table succeeded twice")
    if not all(code == 0 for code in codes.values()):
        problems.append("an agent did not stop cleanly")
    if problems:
        print("NOT OK: " + "; ".join(problems))
        return 1
    print(f"OK: every request succeeded exactly once, {len(moved)} after a takeover")
    return 0


def _why_not_run(row: QueueRow, submitted: list[QueueRow], mailbox: Mailbox) -> str:
    """Why a slot's request did not run, from the mailbox: for one that expired, the submitted
    requests queued ahead of it (agents claim the oldest first, each only with a free worker)."""
    if row.state != "expired" or row.created_at is None or row.deadline is None:
        return f"{row.state}: {row.message or 'no message'}"
    appeared, deadline = row.created_at, row.deadline
    ahead = [
        other
        for other in submitted
        if other.created_at is not None
        and other.created_at < appeared
        and min((r.started_at for r in mailbox.runs(other.id)), default=deadline) > appeared
    ]
    return (
        f"expired: nobody claimed it by its deadline {deadline:%H:%M:%S} UTC (the next slot), "
        f"{len(ahead)} older submitted requests were still queued ahead of it when it was "
        "created (agents claim the oldest first, and with claim = when_free only with a "
        "free worker)"
    )


def _demo(args: argparse.Namespace) -> int:
    monitor = args.monitor_port if args.monitor else None
    if monitor is not None and not _has_monitor():
        raise ConfigError(
            "fdcore demo", "--monitor", "needs fdcore monitor: install the fdcore-monitor plugin"
        )
    if args.dir:
        folder = Path(args.dir).absolute()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            empty = not any(folder.iterdir())
        except OSError as exc:
            raise ConfigError("fdcore demo", "--dir", f"{folder}: {exc.strerror}") from None
        if not empty:
            raise ConfigError("fdcore demo", "--dir", f"{folder} is not empty")
        return run_demo(folder, args.agents, args.requests, args.tables, args.timeout, monitor)
    with tempfile.TemporaryDirectory(prefix="fdcore-demo-") as temporary:
        return run_demo(
            Path(temporary), args.agents, args.requests, args.tables, args.timeout, monitor
        )


class Demo:
    name = "demo"
    help = "run three agents sharing work on a local folder"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--dir", help="an empty folder to keep (default: a temporary one)")
        add_flag(parser, "--agents", Whole(1, 16), default=3, help="agents (default 3)")
        add_flag(parser, "--requests", Whole(1, 10_000), default=40, help="requests (default 40)")
        add_flag(parser, "--tables", Whole(1, 1000), default=8, help="tables (default 8)")
        add_flag(parser, "--timeout", Seconds(), default=300.0, help="seconds (default 300)")
        parser.add_argument(
            "--monitor", action="store_true", help="also serve fdcore monitor's page of it"
        )
        add_flag(
            parser,
            "--monitor-port",
            Whole(0, 65535),
            default=8421,
            help="the monitor's port (8421)",
        )

    def run(self, args: argparse.Namespace) -> int:
        return _demo(args)
