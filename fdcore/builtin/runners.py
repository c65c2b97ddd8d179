"""How a table is run: the table runner extension point.

The agent starts one :class:`TableRun` per table and polls it; it never blocks on one, so the
same agent code runs under the simulator's virtual clock.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from fdcore.abc import TableJob, TableResult, TableRun
from fdcore.builtin.processes import ProcessRecords, child_setup, end_group, exited
from fdcore.contract.models import output_tail

#: How much of a table process's stderr is read at its end: the tail kept is at most 4 KiB.
OUTPUT_READ_BYTES = 8192


class _ProcessRun:
    """A table process leading its own process group; the group ends with the run."""

    def __init__(
        self, process: subprocess.Popen[bytes], log: IO[bytes], records: ProcessRecords
    ) -> None:
        self.process = process
        self.log = log
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
        output = self._output_tail()
        lines = output.strip().splitlines()
        if code == 0:
            return TableResult(True, exit_code=code, output=output)
        last = lines[-1] if lines else ""
        message = f"exit code {code}" + (f": {last}" if last else "")
        return TableResult(False, message, exit_code=code, output=output)

    def _output_tail(self) -> str:
        """The last lines of what the table process wrote to stderr (a run record keeps them)."""
        self.log.seek(max(0, self.log.seek(0, os.SEEK_END) - OUTPUT_READ_BYTES))
        text = self.log.read().decode(errors="replace")
        self.log.close()
        return output_tail(text)

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


class CommandRunner:
    """``[runner] kind = "command"``: run ``command`` once per table, in its own process.

    The table's identity and fencing token reach the command as ``FDCORE_*`` variables, and the
    descriptors in ``job.inherit`` stay open in it (a held lane); exit code 0 is success. Its
    output goes to the agent's stdout; the last line of stderr becomes the failure message. The
    process and everything it starts end with the table, and never outlive the agent
    (:mod:`fdcore.builtin.processes`).
    """

    name = "command"

    def start(self, job: TableJob, options: dict[str, Any]) -> TableRun:
        command = options.get("command")
        if not command or not isinstance(command, list):
            raise ValueError("[runner] command must be a non-empty list of strings")
        log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the run; closed by poll)
        process = subprocess.Popen(
            [str(part) for part in command],
            env={**os.environ, **job.environ()},
            stdin=subprocess.DEVNULL,
            stderr=log,
            cwd=options.get("cwd"),
            pass_fds=job.inherit,
            preexec_fn=child_setup(),  # the agent starts tables from one thread: safe
        )
        records = ProcessRecords(job.agent, job.environment)
        records.add(process.pid)
        return _ProcessRun(process, log, records)

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
