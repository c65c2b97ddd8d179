"""What one look at ``fdcore monitor`` costs with nothing changed, on an environment of many
finished requests: store operations beyond the folders' listings, and time against the time of
listing ``requests/`` and ``status/`` with each entry's stat (docs/monitor.md, "Cost").

    .venv/bin/python benchmarks/bench_monitor.py [--requests 10000] [--repeat 5] [--azurite]

Each request has a status (succeeded) and two run records; ``--waiting N`` leaves the newest N
unclaimed. The files are written once into a memory store and copied byte for byte into a local
folder (and with ``--azurite`` into an Azurite this script starts), so the build takes seconds,
not the minutes of fsynced writes. A fresh monitor app looks at every page once (what never
changes is read then), then each look is timed ``--repeat`` times (medians) through Starlette's
test client (the monitor's work without the network), and its store operations are counted
through a wrapper around the store. ``fdcore queue --json`` runs as a process (with ``--before
CHECKOUT``, that checkout's in turn with this one's).

The same script runs against an older checkout (``PYTHONPATH=<checkout>:<checkout>/plugins/
monitor``): it uses only names both have.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from fdcore_monitor.actions import Actions
from fdcore_monitor.app import Settings, create_app
from fdcore_monitor.snapshot import Source
from starlette.testclient import TestClient

from fdcore.contract.layout import agent_key, run_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, Outcome, RunRecord, State, Status
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins
from fdcore.testing.counting import CountingStore

#: (what, path): the looks measured; a refresh is a page's fragment, fetched every --refresh.
LOOKS = [
    ("agents page refresh", "/?fragment=1"),
    ("queue page", "/queue"),
    ("queue page refresh", "/queue?fragment=1"),
    ("queue, filtered, page 2", "/queue?state=succeeded&agent=etl-1&page=2"),
    ("/metrics scrape", "/metrics"),
]


def build(requests: int, waiting: int) -> Any:
    """A memory store: three agents, ``requests`` requests, the newest ``waiting`` unclaimed."""
    memory = load_plugins().open_storage(f"memory://bench-{uuid.uuid4().hex[:8]}")
    mailbox = Mailbox(memory)
    now = datetime.now(timezone.utc)
    for n in range(3):
        record = AgentRecord(name=f"etl-{n}", updated_at=now, stale_after=3600, concurrency=4)
        mailbox.create(agent_key(record.name), record)
    for n in range(requests):
        request_id = f"r{n:05d}"
        created = now - timedelta(seconds=requests - n)
        submit(mailbox, ["a", "b"], request_id=request_id, now=created)
        if n >= requests - waiting:
            continue
        agent = f"etl-{n % 3}"
        attempt = Attempt(1, agent, created, created + timedelta(seconds=3), Outcome.SUCCEEDED)
        status = Status(request_id, State.SUCCEEDED, created, agent=agent, attempts=[attempt])
        mailbox.create(status_key(request_id), status)
        for index, table in enumerate(("a", "b")):
            start = created + timedelta(seconds=index)
            end = start + timedelta(seconds=1)
            run = RunRecord(request_id, table, agent, 1, 1, start, end, Outcome.SUCCEEDED)
            mailbox.create(run_key(request_id, 1, table), run)
    return memory


def copy_to_folder(memory: Any, root: Path) -> None:
    load_plugins().open_storage(root.as_uri()).close()  # an environment, then its files
    for key in memory.list(""):
        blob = memory.read(key)
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(blob.data)


def copy_to_store(memory: Any, target: Any, workers: int = 16) -> None:
    """Copy each file of ``memory`` that ``target`` lacks (a kept Azurite folder's upload may
    have been cut short)."""

    def copy(key: str) -> None:
        target.create(key, memory.read(key).data)

    missing = sorted(set(memory.list("")) - set(target.list("")))
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(copy, missing, chunksize=64):
            pass


def source(mailbox: Mailbox) -> Source:
    """The monitor's source of ``mailbox``: around an Environment where the monitor has one
    (issue 22), else (an older checkout) around the mailbox itself."""
    try:
        from fdcore.environment import Environment
    except ImportError:
        return Source(mailbox)
    return Source(Environment(mailbox))


def median_seconds(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def listing_with_stat(root: Path) -> Callable[[], object]:
    """List ``requests/`` and ``status/`` of a local folder, with each entry's stat."""

    def call() -> int:
        stats = 0
        for folder in ("requests", "status"):
            for entry in os.scandir(root / folder):
                entry.stat(follow_symlinks=False)
                stats += 1
        return stats

    return call


def measure(url: str, repeat: int, reference: Callable[[], object]) -> None:
    """Print each look's operations beyond the lists, the lists, and its median time beside the
    median of ``reference`` (a listing) timed in turn with it, and their ratio."""
    store = CountingStore(load_plugins().open_storage(url, create=False))
    settings = Settings(source(Mailbox(store)), url, Actions(None, "bench"), "127.0.0.1")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:

        def get(path: str) -> Callable[[], object]:
            def call() -> object:
                answer = http.get(path)
                assert answer.status_code == 200, answer.text
                return answer

            return call

        start = time.perf_counter()
        for _, path in LOOKS:  # the first look at each: everything is read once
            get(path)()
        print(f"  first look at each page: {time.perf_counter() - start:.2f} s", flush=True)
        for what, path in LOOKS:
            store.calls.clear()
            get(path)()
            beyond, lists = sum(store.beyond_lists().values()), store.lists()
            looks, listings = [], []
            for _ in range(repeat):  # side by side: the listing, then the look
                listings.append(median_seconds(reference, 1))
                looks.append(median_seconds(get(path), 1))
            look, listing = statistics.median(looks), statistics.median(listings)
            print(
                f"  {what:<26} {beyond:6d} ops beyond {lists} lists  {look * 1000:8.1f} ms"
                f"  listing {listing * 1000:7.1f} ms  {look / listing:5.1f}x",
                flush=True,
            )


def queue_once(url: str, repeat: int, before: Path | None) -> None:
    """``fdcore queue --json`` as a process, ``repeat`` times (median); with ``before`` (an older
    checkout) that checkout's in turn with it, run from outside either so neither imports the
    other's ``fdcore`` by accident."""
    command = [sys.executable, "-m", "fdcore.cli", "queue", "--env", url, "--json"]
    checkouts: dict[str, dict[str, str]] = {"this checkout": dict(os.environ)}
    if before is not None:
        paths = [before, before / "plugins" / "localfs", before / "plugins" / "monitor"]
        path = os.pathsep.join(str(p.resolve()) for p in paths)
        checkouts = {str(before): {**os.environ, "PYTHONPATH": path}, **checkouts}
    times: dict[str, list[float]] = {what: [] for what in checkouts}
    for _ in range(repeat):  # side by side: each checkout in turn
        for what, env in checkouts.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=env, cwd="/")
            times[what].append(time.perf_counter() - start)
    for what, seconds in times.items():
        median = statistics.median(seconds) * 1000
        print(f"  fdcore queue --json (a process, {what}) {median:8.1f} ms", flush=True)


def local(memory: Any, args: argparse.Namespace) -> None:
    """Each look on a local folder holding the memory store's files, and `fdcore queue`."""
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-monitor-") as folder:
        root = Path(folder) / "env"
        copy_to_folder(memory, root)
        print(
            f"local folder {root.as_uri()}; beside each look: listing requests/ and status/ "
            "with each entry's stat",
            flush=True,
        )
        measure(root.as_uri(), args.repeat, listing_with_stat(root))
        if not args.no_command:
            queue_once(root.as_uri(), args.repeat, args.before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--waiting", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--azurite", action="store_true", help="also on Azurite (fdcore-onelake)")
    parser.add_argument(
        "--azurite-folder",
        type=Path,
        help="Azurite keeps its blobs here (default: in memory); a later run with the same folder "
        "and --requests reuses the upload",
    )
    parser.add_argument("--no-command", action="store_true", help="skip fdcore queue --json")
    parser.add_argument(
        "--before",
        type=Path,
        help="an older checkout: its fdcore queue --json timed in turn with this one's",
    )
    parser.add_argument("--no-local", action="store_true", help="skip the local folder")
    args = parser.parse_args()
    start = time.perf_counter()
    memory = build(args.requests, args.waiting)
    print(f"{args.requests} requests built in {time.perf_counter() - start:.1f} s", flush=True)
    if not args.no_local:
        local(memory, args)
    if args.azurite:
        from fdcore_onelake.testing import Azurite

        with Azurite(args.azurite_folder) as azurite:
            azurite.create_container("fdcore-bench")
            # A kept folder names its environment by what it holds, so a later run reuses it.
            name = f"env-{args.requests}-{args.waiting}" if args.azurite_folder else "env"
            url = azurite.url("fdcore-bench", f"{name}-{uuid.uuid4().hex[:12]}")
            if args.azurite_folder:
                url = azurite.url("fdcore-bench", name)
            target = load_plugins().open_storage(url, create=True)
            start = time.perf_counter()
            copy_to_store(memory, target)
            print(f"Azurite {url}: uploaded in {time.perf_counter() - start:.1f} s", flush=True)

            def listing() -> None:
                for prefix in ("requests/", "status/"):
                    list(target.list(prefix))

            print("  beside each look: listing requests/ and status/ on Azurite", flush=True)
            measure(url, args.repeat, listing)


if __name__ == "__main__":
    main()
