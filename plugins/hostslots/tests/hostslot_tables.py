"""A table function for the fleet test: it logs its own start and end (monotonic, system-wide).

A table killed with its agent logs a start and no end; the test closes it at the kill.
"""

from __future__ import annotations

import json
import os
import random
import time

from fdcore.abc import TableJob

LOG_VARIABLE = "HOSTSLOTS_TEST_LOG"


def _log(job: TableJob, event: str) -> None:
    line = {"event": event, "pid": os.getpid(), "request": job.request, "at": time.monotonic()}
    with open(os.path.join(os.environ[LOG_VARIABLE], f"{os.getpid()}.jsonl"), "a") as handle:
        handle.write(json.dumps(line) + "\n")


def timed_table(job: TableJob) -> None:
    _log(job, "start")
    time.sleep(
        float(os.environ.get("HOSTSLOTS_TEST_TABLE_SECONDS", "0.1")) * random.uniform(0.5, 1.5)
    )
    _log(job, "end")
