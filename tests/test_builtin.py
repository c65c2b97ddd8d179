"""The core's built-in implementations: command and python runners, log notifier, memory store."""

from __future__ import annotations

import logging
import sys
import time
import uuid
from pathlib import Path

import pytest

from fdcore.abc import Notification, TableJob, TableResult, TableRun
from fdcore.contract.models import MAX_OUTPUT_BYTES
from fdcore.errors import EnvironmentNotFound
from fdcore.plugins.manager import NOTIFIER, RUNNER, STORAGE, load_plugins

JOB = TableJob(
    request="r1", table="sales", attempt=2, fencing_token=7, agent="etl-01", environment="x"
)


def wait(run: TableRun, timeout: float = 20) -> TableResult:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = run.poll()
        if result is not None:
            return result
        time.sleep(0.02)
    raise AssertionError("run did not end")


def test_command_runner_passes_the_job_in_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    script = (
        "import os, sys; open(sys.argv[1], 'w').write(' '.join(os.environ[k] for k in "
        "['FDCORE_REQUEST', 'FDCORE_TABLE', 'FDCORE_ATTEMPT', 'FDCORE_FENCING_TOKEN']))"
    )
    runner = load_plugins().get(RUNNER, "command")
    result = wait(runner.start(JOB, {"command": [sys.executable, "-c", script, str(out)]}))
    assert result == TableResult(True)
    assert out.read_text() == "r1 sales 2 7"


def test_command_runner_failure_carries_the_last_stderr_line() -> None:
    script = "import sys; print('step 1', file=sys.stderr); sys.exit('disk full')"
    runner = load_plugins().get(RUNNER, "command")
    result = wait(runner.start(JOB, {"command": [sys.executable, "-c", script]}))
    assert result == TableResult(False, "exit code 1: disk full")


def test_command_runner_logs_each_line_under_the_tables_identity_and_keeps_the_tails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = (
        "import sys\n"
        "for n in range(2000): print(f'row {n:04d} loaded', flush=n % 100 == 0)\n"
        "print('bad row 17', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    runner = load_plugins().get(RUNNER, "command")
    with caplog.at_level(logging.INFO, logger="fdcore.table"):
        result = wait(runner.start(JOB, {"command": [sys.executable, "-c", script]}))
    assert result == TableResult(False, "exit code 3: bad row 17")
    assert result.output == "bad row 17\n"
    assert result.stdout.endswith("row 1999 loaded\n") and result.stdout.startswith("row ")
    assert len(result.stdout.encode()) <= MAX_OUTPUT_BYTES  # the tail a run record keeps
    said = [record.getMessage() for record in caplog.records if record.name == "fdcore.table"]
    assert len(said) == 2001
    assert "etl-01 r1/sales#2 stdout: row 0000 loaded" in said
    assert "etl-01 r1/sales#2 stdout: row 1999 loaded" in said
    assert "etl-01 r1/sales#2 stderr: bad row 17" in said


def test_command_runner_keeps_no_stdout_of_a_table_that_succeeded() -> None:
    runner = load_plugins().get(RUNNER, "command")
    result = wait(runner.start(JOB, {"command": [sys.executable, "-c", "print('done')"]}))
    assert result.succeeded and result.stdout == ""


def test_command_runner_cancel_stops_the_process() -> None:
    runner = load_plugins().get(RUNNER, "command")
    run = runner.start(JOB, {"command": [sys.executable, "-c", "import time; time.sleep(60)"]})
    run.cancel()
    result = wait(run)
    assert not result.succeeded


def test_command_runner_needs_a_command() -> None:
    with pytest.raises(ValueError, match="command must be a non-empty list"):
        load_plugins().get(RUNNER, "command").start(JOB, {})


def failing_table(job: TableJob) -> None:
    raise RuntimeError(f"no table {job.table}")


def test_python_runner_reports_exceptions() -> None:
    runner = load_plugins().get(RUNNER, "python")
    assert wait(runner.start(JOB, {"function": failing_table})) == TableResult(
        False, "RuntimeError: no table sales"
    )
    ok = runner.start(JOB, {"function": "builtins:print"})
    assert wait(ok) == TableResult(True)


def test_log_notifier_writes_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    channel = load_plugins().get(NOTIFIER, "log").open("oncall", {})
    with caplog.at_level(logging.WARNING):
        channel.send(Notification("prod", "inc-1", "Request r1 failed", "error", "...", "oncall"))
    assert "[oncall] incident inc-1 (error): Request r1 failed" in caplog.text


def test_memory_backend_serves_memory_urls() -> None:
    url = f"memory://{uuid.uuid4().hex}"
    backend = load_plugins().storage_backend(url)
    assert backend.name == "memory"
    first = backend.open(url, {})
    second = backend.open(url, {})
    first.create("k", b"v")
    assert second.read("k") is not None  # one process, one name: one store
    assert load_plugins().get(STORAGE, "memory") is not None


def test_memory_store_opened_without_create_must_exist_in_this_process() -> None:
    backend = load_plugins().get(STORAGE, "memory")
    url = f"memory://{uuid.uuid4().hex}"
    with pytest.raises(EnvironmentNotFound, match=f"^environment not found: {url} "):
        backend.open(url, {}, create=False)
    backend.open(url, {}).create("k", b"v")
    assert backend.open(url, {}, create=False).read("k") is not None
