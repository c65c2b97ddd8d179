"""What one malformed file costs an idle agent's poll, with and without the change check.

An agent (in this process, manual clock) polls a local folder holding one malformed request of
1 MiB. With :class:`fdcore.abc.ChangeCheck` the file is read once and then only ``stat``-ed;
without it (the check hidden) it is read every poll, though not decoded again. Prints the CPU
time per poll, medians of several runs side by side, and their ratio::

    .venv/bin/python benchmarks/bad_file_poll.py [--polls 300] [--runs 5]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from fdcore_localfs.store import LocalFolderStorage

from fdcore.clock import ManualClock
from fdcore.testing.memory_fleet import START, MemoryFleet


class WithoutChangeCheck(LocalFolderStorage):
    """The local folder with its ``unchanged`` hidden: readers cannot skip an unchanged file."""

    unchanged = None  # type: ignore[assignment]


def cpu_per_poll(storage_class: type[LocalFolderStorage], polls: int) -> float:
    """Milliseconds of CPU per poll of an idle agent beside one malformed 1 MiB request."""
    root = Path(tempfile.mkdtemp(prefix="fdcore-bad-file-"))
    try:
        storage = storage_class(root / "env")
        bad = root / "env" / "requests" / "bad.json"
        bad.parent.mkdir(parents=True, exist_ok=True)
        bad.write_bytes(b'{"id": "bad", "x": "' + b"a" * ((1 << 20) - 40) + b'"')  # no closing
        fleet = MemoryFleet(storage, ManualClock(START))  # type: ignore[arg-type]
        agent = fleet.agent("etl-01")
        agent.poll()  # reads and reports the bad file once
        started = time.process_time()
        for _ in range(polls):
            fleet.clock.advance(5)
            agent.poll()
        return (time.process_time() - started) / polls * 1000
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the report of the bad file (and a skew warning)
    with_check, without = [], []
    for _ in range(args.runs):  # side by side, so both meet the same machine load
        with_check.append(cpu_per_poll(LocalFolderStorage, args.polls))
        without.append(cpu_per_poll(WithoutChangeCheck, args.polls))
    a, b = statistics.median(with_check), statistics.median(without)
    print(f"with the change check: {a:.3f} ms CPU per poll (median of {args.runs})")
    print(f"without:               {b:.3f} ms CPU per poll")
    print(f"ratio: {b / a:.1f}x")


if __name__ == "__main__":
    main()
