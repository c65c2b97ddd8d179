"""How a table is run: the table runner extension point.

The agent starts one :class:`TableRun` per table and polls it; it never blocks on one, so the
same agent code runs under the simulator's virtual clock.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from fdcore.abc import TableJob, TableResult, TableRun
from fdcore.builtin.processes import (
    ProcessRecords,
    end_group,
    exited,
    state_root,
    table_process,
)
from fdcore.contract.models import output_tail

log = logging.getLogger("fdcore.table")

#: How much of each of a table process's streams is kept as it runs: the tail a run record
#: keeps (its last lines, at most 4 KiB) is cut from it at the end.
OUTPUT_READ_BYTES = 8192
#: The longest line read at once: a longer one is logged and kept in pieces of this size.
LINE_BYTES = 8192
#: Seconds the end of a run waits for the rest of its output: the pipes close as the process
#: group ends; a process that left the group and keeps them open is not waited for.
OUTPUT_GRACE = 1.0


class _Stream:
    """One stream of a table process (stdout or stderr), read on a thread of its own: each
    line goes to the agent's log under the table's identity, and the last
    :data:`OUTPUT_READ_BYTES` of it are kept for the run record."""

    def __init__(self, pipe: IO[bytes], who: str, name: str) -> None:
        self.pipe = pipe
        self.who = who  # "agent request/table#attempt": whose line it is, in the log
        self.name = name
        self.tail: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.thread = threading.Thread(target=self._read, daemon=True, name=f"{who} {name}")
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under us: done
            for line in iter(lambda: self.pipe.readline(LINE_BYTES), b""):
                text = line.decode(errors="replace").rstrip("\r\n")
                log.info("%s %s: %s", self.who, self.name, text)
                self._keep(line)

    def _keep(self, line: bytes) -> None:
        self.tail.append(line)
        self.size += len(line)
        while self.size > OUTPUT_READ_BYTES and len(self.tail) > 1:
            self.size -= len(self.tail.popleft())

    def text(self) -> str:
        """The last lines read (once the stream ended, or :data:`OUTPUT_GRACE` passed)."""
        self.thread.join(OUTPUT_GRACE)
        with contextlib.suppress(OSError):
            self.pipe.close()
        return output_tail(b"".join(list(self.tail)).decode(errors="replace"))


class _ProcessRun:
    """A table process leading its own process group; the group ends with the run."""

    def __init__(self, process: subprocess.Popen[bytes], who: str, records: ProcessRecords) -> None:
        assert process.stdout is not None and process.stderr is not None  # both piped
        self.process = process
        self.stdout = _Stream(process.stdout, who, "stdout")
        self.stderr = _Stream(process.stderr, who, "stderr")
        self.records = records

    def _ended(self) -> int:
        """End what is left of the group, then reap the table process; its exit code.

        What the table process started must not write on after it. The group is signalled
        before the process is reaped: until then its number cannot be reused by another group.
        """
        end_group(self.process.pid)
        code = self.process.wait()
        self.records.remove(self.process.pid)
        return code

    def poll(self) -> TableResult | None:
        if self.process.returncode is None and not exited(self.process.pid):
            return None
        code = self._ended()
        output = self.stderr.text()
        stdout = self.stdout.text()
        lines = output.strip().splitlines()
        if code == 0:
            return TableResult(True, exit_code=code, output=output)
        last = lines[-1] if lines else ""
        message = f"exit code {code}" + (f": {last}" if last else "")
        return TableResult(False, message, exit_code=code, output=output, stdout=stdout)

    def wait(self, timeout: float | None = None) -> bool:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def cancel(self) -> None:
        """SIGTERM to the group, SIGKILL to what is left of it after 5 s (or once it exited)."""
        if self.process.returncode is None:
            end_group(self.process.pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while not exited(self.process.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        self._ended()
        self.stdout.text()  # the pipes closed with the group: their threads end
        self.stderr.text()


class CommandRunner:
    """``[runner] kind = "command"``: run ``command`` once per table, in its own process.

    The table's identity and fencing token reach the command as ``FDCORE_*`` variables, and the
    descriptors in ``job.inherit`` stay open in it (a held lane); exit code 0 is success. Each
    line it prints (stdout and stderr) goes to the agent's log under the table's identity
    (``etl-01 r1/sales#1 stdout: ...``); the last line of stderr becomes the failure message,
    and the run record keeps the tail of stderr, and of stdout for a failed table. The
    process and everything it starts end with the table, and never outlive the agent
    (:mod:`fdcore.builtin.processes`).
    """

    name = "command"

    def __init__(self) -> None:
        # Each agent's records, made once (a hash and a folder), by agent, environment and
        # state folder: the table processes it has running.
        self._records: dict[tuple[str, str, Path], ProcessRecords] = {}

    def _records_of(self, job: TableJob) -> ProcessRecords:
        key = (job.agent, job.environment, state_root())
        records = self._records.get(key)
        if records is None:
            records = self._records[key] = ProcessRecords(job.agent, job.environment, key[2])
        return records

    def start(self, job: TableJob, options: dict[str, Any]) -> TableRun:
        command = options.get("command")
        if not command or not isinstance(command, list):
            raise ValueError("[runner] command must be a non-empty list of strings")
        env = {**os.environ, **job.environ()}
        argv, started = table_process([str(part) for part in command], env, options.get("cwd"))
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=options.get("cwd"),
            pass_fds=job.inherit,
            **started,  # its own session, and death with the agent
        )
        records = self._records_of(job)
        records.add(process.pid)
        who = f"{job.agent} {job.request}/{job.table}#{job.attempt}"
        return _ProcessRun(process, who, records)

    def end_leftover_runs(self, agent: str, environment: str) -> int:
        """At start-up: end the table processes an earlier instance of ``agent`` left running."""
        return ProcessRecords(agent, environment).end_leftovers()


class _ThreadRun:
    def __init__(self, function: Callable[[TableJob], object], job: TableJob) -> None:
        self.result: TableResult | None = None
        self.thread = threading.Thread(target=self._run, args=(function, job), daemon=True)
        self.thread.start()

    def _run(self, function: Callable[[TableJob], object], job: TableJob) -> None:
        try:
            value = function(job)
        except Exception as exc:  # the table failed; the agent records why
            self.result = TableResult(False, f"{type(exc).__name__}: {exc}")
            return
        if isinstance(value, TableResult):
            self.result = value
        else:
            self.result = TableResult(value is not False)

    def poll(self) -> TableResult | None:
        return None if self.thread.is_alive() else self.result

    def wait(self, timeout: float | None = None) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def cancel(self) -> None:
        pass  # a Python thread cannot be stopped from outside; the agent stops waiting for it


class PythonRunner:
    """``[runner] kind = "python"``: call ``function(job)`` in a thread (tests and embedding).

    ``function`` is a callable or a ``"module:attribute"`` string. Raising, or returning False or
    a failed :class:`TableResult`, fails the table.
    """

    name = "python"

    def start(self, job: TableJob, options: dict[str, Any]) -> TableRun:
        return _ThreadRun(resolve_function(options.get("function")), job)


def resolve_function(function: object) -> Callable[[TableJob], object]:
    """A callable, or the one a ``"module:attribute"`` string names; ValueError otherwise."""
    if isinstance(function, str):
        module, _, attribute = function.partition(":")
        try:
            function = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ValueError(f"cannot load {function!r}: {exc}") from None
    if not callable(function):
        raise ValueError("must be a callable or 'module:attribute'")
    return function
