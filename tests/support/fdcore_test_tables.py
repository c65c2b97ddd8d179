"""Table runners for tests that start real agent processes (importable via PYTHONPATH).

Every table write goes through the fencing check and is logged with monotonic start and end
times (system-wide on Linux), so a test can prove no table ever had two writers at once.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import time
from pathlib import Path

from fdcore.abc import Storage, TableJob, TableLeases
from fdcore.errors import StaleFencingToken, StorageUnavailable
from fdcore.mailbox.fencing import fenced_write
from fdcore.plugins.manager import LEASES, load_plugins


@functools.cache
def _storage(url: str) -> Storage:
    options = json.loads(os.environ.get("FDCORE_TEST_STORAGE_OPTIONS", "{}"))
    return load_plugins().open_storage(url, options)


@functools.cache
def _leases(url: str, provider: str) -> TableLeases:
    """The environment's table leases, from the provider the agent uses (``job.leases``)."""
    return load_plugins().get(LEASES, provider).open(_storage(url), {})


def _log(job: TableJob, **fields: object) -> None:
    folder = Path(os.environ["FDCORE_TEST_LOG"])
    line = json.dumps(
        {
            "agent": job.agent,
            "table": job.table,
            "request": job.request,
            "attempt": job.attempt,
            "token": job.fencing_token,
            **fields,
        }
    )
    with open(folder / f"{job.agent}-{os.getpid()}.jsonl", "a") as handle:
        handle.write(line + "\n")


def write_table(job: TableJob) -> None:
    """Work briefly, then write the table through the fencing check."""
    seconds = float(os.environ.get("FDCORE_TEST_TABLE_SECONDS", "0.02"))
    shortest = float(os.environ.get("FDCORE_TEST_TABLE_MIN_SECONDS", "0"))
    start = time.monotonic()
    time.sleep(random.uniform(shortest, max(shortest, seconds)))
    try:
        _write_riding_out_outages(job)
    except StaleFencingToken as exc:
        _log(job, start=start, end=time.monotonic(), rejected=str(exc))
        raise
    _log(job, start=start, end=time.monotonic(), rejected=None)


def kill_agent(job: TableJob) -> None:
    """A poison table: kills the agent process that runs it (SIGKILL, no clean-up)."""
    _log(job, start=time.monotonic(), end=time.monotonic(), rejected=None, killed=True)
    os.kill(os.getpid(), signal.SIGKILL)


def _write_riding_out_outages(job: TableJob, patience: float = 60.0) -> None:
    """Like a well-behaved table job: a mailbox outage delays the write, it does not fail it."""
    deadline = time.monotonic() + patience
    while True:
        try:
            fenced_write(
                _storage(job.environment),
                _leases(job.environment, job.leases),
                job.table,
                job.fencing_token,
                {"request": job.request, "agent": job.agent},
            )
            return
        except StorageUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def poison_or_write(job: TableJob) -> None:
    """Table ``poison`` kills the agent running it; any other table is written as usual."""
    if job.table == "poison":
        kill_agent(job)
    write_table(job)


def sleep_table(job: TableJob) -> None:
    """A table that does not touch the mailbox: for tests where the mailbox itself goes away."""
    time.sleep(float(os.environ.get("FDCORE_TEST_TABLE_SECONDS", "0.2")))
    _log(job, start=time.monotonic(), end=time.monotonic(), rejected=None)
