"""Table functions for tests that run real agent processes, and the log of their writes.

Name them in an agent's ``[runner]`` (``kind = "python"``, ``function =
"fdcore.testing.tables:write_table"``). Every table write goes through the fencing check and is
logged with monotonic start and end times (system-wide on Linux), so a test can prove no table
ever had two writers at once (:func:`fdcore.testing.assertions.double_writers`).

The ``fdcore_fleet`` fixture sets the agents up for them (:func:`log_table_writes`). They read
their settings from the agent's environment: ``FDCORE_TEST_LOG`` (the log's folder),
``FDCORE_TEST_TABLE_SECONDS`` and ``FDCORE_TEST_TABLE_MIN_SECONDS`` (how long a table works); the
environment's ``[storage]`` options come with the job, as its agent has them.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import time
from pathlib import Path

import attrs

from fdcore.abc import Storage, TableJob, TableLeases
from fdcore.cli.fleet import AgentFleet
from fdcore.errors import StaleFencingToken, StorageUnavailable
from fdcore.mailbox.fencing import fenced_write
from fdcore.plugins.manager import LEASES, load_plugins

__all__ = [
    "LOG_VARIABLE",
    "TableWrite",
    "kill_agent",
    "log_table_writes",
    "poison_or_write",
    "sleep_table",
    "table_writes",
    "write_table",
]

LOG_VARIABLE = "FDCORE_TEST_LOG"


Where = tuple[str, str | None, tuple[tuple[str, str], ...]]  # URL, backend, [storage] options


def _where(job: TableJob) -> Where:
    return job.environment, job.storage_backend, tuple(sorted(job.storage_options.items()))


@functools.cache
def _storage(where: Where) -> Storage:
    """The job's environment, opened as its agent opened it (once per process)."""
    url, backend, options = where
    return load_plugins().open_storage(url, dict(options), backend, create=False)


@functools.cache
def _leases(where: Where, provider: str) -> TableLeases:
    """The environment's table leases, from the provider the agent uses (``job.leases``)."""
    return load_plugins().get(LEASES, provider).open(_storage(where), {})


def _log(job: TableJob, **fields: object) -> None:
    folder = Path(os.environ[LOG_VARIABLE])
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
                _storage(_where(job)),
                _leases(_where(job), job.leases),
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


# -- the test's side: set the agents up, read the log back ----------------------------------------


@attrs.frozen
class TableWrite:
    """One logged table write. ``start`` and ``end`` are monotonic seconds."""

    agent: str
    table: str
    request: str
    attempt: int
    token: int
    start: float
    end: float
    rejected: str | None  # why the fencing check refused the write; None: it was accepted
    killed: bool = False  # the table killed its agent instead (``kill_agent``)


def log_table_writes(fleet: AgentFleet, folder: Path) -> None:
    """Have the fleet's agents log the writes of these table functions under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    fleet.env[LOG_VARIABLE] = str(folder)


def table_writes(fleet: AgentFleet) -> list[TableWrite]:
    """Every table write the fleet's agents logged so far, in no particular order."""
    writes: list[TableWrite] = []
    for path in sorted(Path(fleet.env[LOG_VARIABLE]).glob("*.jsonl")):
        writes.extend(TableWrite(**json.loads(line)) for line in path.read_text().splitlines())
    return writes
