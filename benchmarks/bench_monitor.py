"""What one look at ``fdcore monitor`` costs on a local folder of many requests: a /metrics
scrape (the first reads every run record; later ones only those of unfinished requests), the
queue page and the agents page, against ``fdcore queue --json`` (docs/monitor.md, "Cost").

    .venv/bin/python benchmarks/bench_monitor.py [--requests 2000] [--repeat 5]

Each request has a status and two run records; one in ten is still waiting. Times are medians
of ``--repeat`` calls (the first scrape is timed alone), in this process through Starlette's
test client, so they are the monitor's work without the network.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from fdcore_monitor.actions import Actions
from fdcore_monitor.app import Settings, create_app
from fdcore_monitor.snapshot import Source
from starlette.testclient import TestClient

from fdcore.contract.layout import agent_key, run_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, Outcome, RunRecord, State, Status
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins


def build(url: str, requests: int) -> Mailbox:
    mailbox = Mailbox(load_plugins().open_storage(url))
    now = datetime.now(timezone.utc)
    for n in range(3):
        record = AgentRecord(name=f"etl-{n}", updated_at=now, stale_after=60, concurrency=4)
        mailbox.create(agent_key(record.name), record)
    for n in range(requests):
        request_id = f"r{n:05d}"
        created = now - timedelta(seconds=requests - n)
        submit(mailbox, ["a", "b"], request_id=request_id, now=created)
        if n % 10 == 0:
            continue  # waiting
        agent = f"etl-{n % 3}"
        attempt = Attempt(1, agent, created, created + timedelta(seconds=3), Outcome.SUCCEEDED)
        status = Status(request_id, State.SUCCEEDED, created, agent=agent, attempts=[attempt])
        mailbox.create(status_key(request_id), status)
        for index, table in enumerate(("a", "b")):
            start = created + timedelta(seconds=index)
            run = RunRecord(
                request_id,
                table,
                agent,
                1,
                1,
                start,
                start + timedelta(seconds=1),
                Outcome.SUCCEEDED,
            )
            mailbox.create(run_key(request_id, 1, table), run)
    return mailbox


def seconds(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="fdcore-bench-monitor-"))
    url = (folder / "env").as_uri()
    start = time.perf_counter()
    mailbox = build(url, args.requests)
    print(f"{args.requests} requests written in {time.perf_counter() - start:.1f} s ({url})")
    settings = Settings(Source(mailbox), url, Actions(None, "bench"), "127.0.0.1")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:

        def get(path: str) -> Callable[[], object]:
            def call() -> object:
                answer = http.get(path)
                assert answer.status_code == 200, answer.text
                return answer

            return call

        rows = [
            ("/metrics, first scrape", seconds(get("/metrics"), 1)),
            ("/metrics, later scrapes", seconds(get("/metrics"), args.repeat)),
            ("queue page (newest 500 rows)", seconds(get("/queue"), args.repeat)),
            ("queue fragment (each refresh)", seconds(get("/queue?fragment=1"), args.repeat)),
            ("agents page", seconds(get("/"), args.repeat)),
        ]
    command = [sys.executable, "-m", "fdcore.cli", "queue", "--env", url, "--json"]
    rows.append(
        (
            "fdcore queue --json (a process)",
            seconds(lambda: subprocess.run(command, check=True, capture_output=True), args.repeat),
        )
    )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
