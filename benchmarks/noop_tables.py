"""The tables of the real-process benchmarks: each logs when it started and ended.

``noop`` does no work (``bench_fleet.py``, ``throughput.py``); ``sleepy`` works for the seconds
its table name says (``claim_policies_real.py``).

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
    _log(job, time.time())


def _log(job: TableJob, started: float) -> None:
    line = {"request": job.request, "table": job.table, "start": started, "end": time.time()}
    folder = Path(os.environ["FDCORE_BENCH_LOG"])
    with open(folder / f"{os.getpid()}.jsonl", "a") as handle:
        handle.write(json.dumps(line) + "\n")


def sleepy(job: TableJob) -> None:
    """A table that works for the seconds its name ends with (``t12-s0.350``), then logs."""
    started = time.time()
    time.sleep(float(job.table.rpartition("-s")[2]))
    _log(job, started)
