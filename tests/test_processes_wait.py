"""``fdcore submit --wait`` and ``fdcore wait`` as a scheduler runs them: real command processes
against a real agent process on a local folder, one exit status per way a request ends
(docs/agents.md, "Waiting for a request"). One agent serves the whole module: its tables say by
their name what they do (``ok*`` succeed at once, ``nap*`` take a second, ``fail*`` fail,
``slow*`` run until stopped)."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_cli_errors import assert_one_error_line, run_fdcore
from test_processes_operator import command, state

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.cli.wait import CANCELLED, EXPIRED, FAILED, SUCCEEDED, TIMED_OUT
from fdcore.contract.codec import format_time
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit

pytestmark = [pytest.mark.slow, pytest.mark.processes]

AGENT = {"poll_seconds": 0.3, "stale_after": 2.0, "concurrency": 3, "shutdown_grace": 10}
PIPELINE = {"grace_seconds": 1.0, "lease_seconds": 3.0}
TABLE = """
import os, sys, time
table = os.environ["FDCORE_TABLE"]
print(f"table {table} of {os.environ['FDCORE_REQUEST']} starts", file=sys.stderr, flush=True)
if table.startswith("fail"):
    print("rows loaded: 16", flush=True)
    print("bad row 17", file=sys.stderr)
    sys.exit(3)
time.sleep(60 if table.startswith("slow") else 1 if table.startswith("nap") else 0)
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentFleet]:
    folder = tmp_path_factory.mktemp("wait")
    fleet = AgentFleet(folder, (folder / "env").as_uri())
    script = folder / "table.py"
    script.write_text(TABLE)
    fleet.env["FDCORE_RUNNER_STATE"] = str(folder / "runner-state")
    runner = {"kind": "command", "command": [sys.executable, str(script)]}
    fleet.add("w-01", {"agent": AGENT, "pipeline": PIPELINE, "runner": runner}).start()
    yield fleet
    fleet.stop_all()
    fleet.kill_all()


def fdcore(fleet: AgentFleet, *args: str) -> subprocess.CompletedProcess[str]:
    """``fdcore ARGS --env <the fleet's>`` in a new process."""
    return run_fdcore(*args, "--env", fleet.environment)


def fdcore_process(
    fleet: AgentFleet, *args: str, stderr: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """``fdcore ARGS --env <the fleet's>`` started, its output read through pipes."""
    return subprocess.Popen(
        [sys.executable, "-m", "fdcore.cli", *args, "--env", fleet.environment],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def in_process(
    capsys: pytest.CaptureFixture[str], fleet: AgentFleet, *args: str
) -> subprocess.CompletedProcess[str]:
    """``fdcore ARGS --env <the fleet's>`` in this process: the checks besides each exit
    status's own (a process start costs seconds on a loaded machine)."""
    return command(capsys, *args, "--env", fleet.environment)


def test_a_request_that_succeeds_exits_0_with_its_final_line(
    fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    result = fdcore(fleet, "submit", "--entities", "ok1,ok2", "--id", "r-ok", "--wait")
    assert (result.returncode, result.stderr) == (SUCCEEDED, ""), result
    # Off a terminal: the id (as submit prints it), then the final line only.
    assert result.stdout.splitlines() == [
        "r-ok",
        "request r-ok succeeded (tables ok1, ok2; by w-01)",
    ]
    waited = in_process(capsys, fleet, "wait", "r-ok", "--json")
    shown = in_process(capsys, fleet, "show", "r-ok", "--json")
    assert waited.returncode == SUCCEEDED, waited.stderr
    assert json.loads(waited.stdout) == json.loads(shown.stdout)
    assert json.loads(waited.stdout)["state"] == "succeeded"


def test_a_failed_request_exits_1_with_the_failed_tables_output_on_stderr(
    fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    result = fdcore(fleet, "submit", "--entities", "ok1,fail2,ok3", "--id", "r-fail", "--wait")
    assert result.returncode == FAILED, result
    assert result.stdout.splitlines()[0] == "r-fail"
    [final] = result.stdout.splitlines()[1:]
    assert final.startswith("request r-fail failed: ") and "fail2" in final, final
    assert result.stderr.splitlines() == [
        "fail2 (attempt 1): exit code 3: bad row 17",
        "  | table fail2 of r-fail starts",
        "  | bad row 17",
        "  stdout:",
        "  | rows loaded: 16",
    ]
    # the agent's log: every line the table printed, under the table's identity
    log = fleet.agents["w-01"].output()
    assert "fdcore.table: w-01 r-fail/fail2#1 stdout: rows loaded: 16" in log
    assert "fdcore.table: w-01 r-fail/fail2#1 stderr: bad row 17" in log
    assert "\nrows loaded: 16" not in log  # never unprefixed
    again = in_process(capsys, fleet, "wait", "r-fail", "--json")
    assert again.returncode == FAILED
    assert json.loads(again.stdout)["state"] == "failed"


def test_submit_json_is_one_document_and_with_wait_the_final_story(
    fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script parses what ``submit --json`` prints as it is: no id line before the JSON."""
    flags = ("--entities", "ok1,ok2", "--id", "r-json", "--deadline", "10m", "--json")
    queued = in_process(capsys, fleet, "submit", *flags)
    assert queued.returncode == SUCCEEDED, queued.stderr
    document = json.loads(queued.stdout)
    assert (document["request"], document["tables"]) == ("r-json", ["ok1", "ok2"])
    assert document["deadline"] > document["created_at"] and document["max_attempts"] is None
    # Submitted again with --wait (the same work: idempotent), the final story alone.
    waited = in_process(capsys, fleet, "submit", *flags, "--wait")
    assert waited.returncode == SUCCEEDED, waited.stderr
    shown = in_process(capsys, fleet, "show", "r-json", "--json")
    assert json.loads(waited.stdout) == json.loads(shown.stdout)
    assert json.loads(waited.stdout)["state"] == "succeeded"
    failed = in_process(
        capsys, fleet, "submit", "--entities", "fail1", "--id", "r-json-fail", "--wait", "--json"
    )
    assert failed.returncode == FAILED
    assert json.loads(failed.stdout)["state"] == "failed"
    assert "bad row 17" in failed.stderr  # the failed table's tail, off stdout


def test_a_request_past_its_deadline_exits_3(fleet: AgentFleet) -> None:
    # submit refuses a deadline already past: this one passed while the request waited
    past = datetime.now(timezone.utc) - timedelta(seconds=1)
    submit(fleet.mailbox, ["ok1"], request_id="r-late", deadline=past)
    result = fdcore(fleet, "wait", "r-late")
    assert result.returncode == EXPIRED, result
    assert result.stdout.splitlines() == [
        f"request r-late expired: not claimed before its deadline {format_time(past)[:19]}Z",
    ]


def test_a_wait_that_times_out_exits_124_and_a_cancel_from_elsewhere_ends_a_wait_with_4(
    fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    submitted = in_process(capsys, fleet, "submit", "--entities", "slow1", "--id", "r-slow")
    assert submitted.returncode == 0, submitted.stderr
    assert wait_until(lambda: state(fleet.mailbox, "r-slow") is State.RUNNING, 30)
    timed_out = fdcore(fleet, "wait", "r-slow", "--timeout", "1s")
    assert timed_out.returncode == TIMED_OUT, timed_out
    assert timed_out.stdout == "request r-slow still running after waiting 1s; it goes on\n"
    assert state(fleet.mailbox, "r-slow") is State.RUNNING  # the request goes on
    waiting = fdcore_process(fleet, "wait", "r-slow")
    try:
        cancelled = in_process(
            capsys, fleet, "cancel", "r-slow", "--by", "ann", "--reason", "wrong day"
        )
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
        waiting.wait()
    assert waiting.returncode == CANCELLED, (out, err)
    assert out == "request r-slow cancelled: cancelled by ann: wrong day\n"


def test_an_unknown_request_and_a_bad_timeout_exit_2_with_one_line(
    fleet: AgentFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_error_line(fdcore(fleet, "wait", "r-nowhere"), "request 'r-nowhere' not found")
    assert_one_error_line(
        in_process(capsys, fleet, "wait", "r-ok", "--timeout", "soon"), "fdcore wait: --timeout: "
    )
    refused = in_process(
        capsys, fleet, "submit", "--entities", "ok1", "--id", "r-notime", "--timeout", "5s"
    )
    assert_one_error_line(refused, "fdcore submit: --timeout: only with --wait")
    assert fleet.mailbox.request("r-notime") is None  # nothing half-done: not queued


def test_a_submit_retried_after_a_lost_answer_queues_one_request(fleet: AgentFleet) -> None:
    folder = Path(fleet.environment.removeprefix("file://"))
    first = fdcore_process(fleet, "submit", "--entities", "nap1,ok2", "--id", "r-lost", "--wait")
    try:  # the answer is lost: the process dies after its write
        assert wait_until(lambda: (folder / "requests" / "r-lost.json").exists(), 30)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    again = fdcore(fleet, "submit", "--entities", "nap1,ok2", "--id", "r-lost", "--wait")
    assert again.returncode == SUCCEEDED, again
    assert sorted(p.name for p in (folder / "requests").glob("r-lost*")) == ["r-lost.json"]
    runs = [run.table for run in fleet.mailbox.runs("r-lost")]
    assert sorted(runs) == ["nap1", "ok2"]  # each table ran once


def test_on_a_terminal_the_wait_shows_each_table_as_it_runs(fleet: AgentFleet) -> None:
    controller, terminal = pty.openpty()
    try:
        process = fdcore_process(
            fleet, "submit", "--entities", "nap1,nap2", "--id", "r-shown", "--wait", stderr=terminal
        )
        os.close(terminal)
        out, _ = process.communicate(timeout=60)
        shown = read_all(controller)
    finally:
        os.close(controller)
    assert process.returncode == SUCCEEDED, shown
    assert out.splitlines() == ["r-shown", "request r-shown succeeded (tables nap1, nap2; by w-01)"]
    lines = [line.partition("  ")[2] for line in shown.splitlines()]  # after the time
    assert "request r-shown running on w-01, attempt 1, table nap1 (1/2)" in lines, shown
    assert "request r-shown running on w-01, attempt 1, table nap2 (2/2)" in lines, shown
    assert lines[-1] == "request r-shown succeeded", shown


def read_all(controller: int) -> str:
    """What was written to the terminal, until its last writer closed it."""
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: no writer left
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode().replace("\r\n", "\n")
