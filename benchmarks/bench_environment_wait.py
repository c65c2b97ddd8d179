"""How soon ``Environment.wait`` returns after a request's final status lands on a local folder:
with the folder's watch (inotify), and through the same folder without it (a store that only
reads, so the wait re-reads the status every ``poll`` seconds).

    .venv/bin/python benchmarks/bench_environment_wait.py [--runs 20] [--poll 1.0]

Each run submits a request, starts a wait in this thread, and after a random pause (0.1 to
0.6 s) another Environment on the folder, in another thread, cancels it (no agent holds it: the
cancel writes the final status at once, as an agent's last write would). The figure is from
the start of that cancel to the wait's return: an upper bound of the time since the status
landed (it includes the cancel's own reads and writes).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from fdcore_localfs.store import LocalFolderStorage

from fdcore.environment import Environment
from fdcore.errors import RequestCancelled
from fdcore.mailbox.access import Mailbox
from fdcore.testing.broken import BrokenStorage


def one_wait(waiter: Environment, writer: Environment, request_id: str, pause: float) -> float:
    waiter.submit(["sales"], id=request_id)
    started: list[float] = []

    def cancel() -> None:
        time.sleep(pause)
        started.append(time.monotonic())
        writer.cancel(request_id, by="bench")

    thread = threading.Thread(target=cancel)
    thread.start()
    with contextlib.suppress(RequestCancelled):
        waiter.wait(request_id, timeout=30)
    returned = time.monotonic()
    thread.join()
    return returned - started[0]


def run(folder: Path, watched: bool, runs: int, poll: float, rng: random.Random) -> list[float]:
    storage = LocalFolderStorage(folder)
    waiter = Environment(Mailbox(storage if watched else BrokenStorage(storage)), poll=poll)  # type: ignore[arg-type]
    writer = Environment(Mailbox(LocalFolderStorage(folder)))
    mode = "watch" if watched else "poll"
    return [one_wait(waiter, writer, f"{mode}-{n}", rng.uniform(0.1, 0.6)) for n in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    rng = random.Random(22)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "env"
        LocalFolderStorage(folder, create=True)
        print(f"| store | runs | median | max |  (poll {args.poll:g} s)")
        print("|---|---|---|---|")
        for watched in (True, False):
            seconds = run(folder, watched, args.runs, args.poll, rng)
            name = "local folder, watched" if watched else "local folder, polled"
            print(
                f"| {name} | {len(seconds)} | {statistics.median(seconds) * 1000:.1f} ms "
                f"| {max(seconds) * 1000:.1f} ms |"
            )


if __name__ == "__main__":
    main()
