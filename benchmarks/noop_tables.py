"""The zero-work table of ``benchmarks/bench_fleet.py``: logs when it started and ended.

Agents name it in ``[runner]`` (``kind = "python"``, ``function = "noop_tables:noop"``) with this
folder on their ``PYTHONPATH``; each line of ``$FDCORE_BENCH_LOG/<pid>.jsonl`` is one table run,
with wall-clock start and end (every agent runs on this machine, so they compare).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fdcore.abc import TableJob


def noop(job: TableJob) -> None:
    started = time.time()
    line = {"request": job.request, "table": job.table, "start": started, "end": time.time()}
    folder = Path(os.environ["FDCORE_BENCH_LOG"])
    with open(folder / f"{os.getpid()}.jsonl", "a") as handle:
        handle.write(json.dumps(line) + "\n")
