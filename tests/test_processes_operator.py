"""The operator's actions with real agent processes, real table processes and real signals:
``fdcore cancel`` of a running request, ``fdcore retry`` of a failed one, ``fdcore show`` of a
taken-over one (docs/operations.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_errors import assert_one_error_line, run_fdcore

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.cli.main import main
from fdcore.contract.models import Outcome, State
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import holder

pytestmark = pytest.mark.processes

POLL = 0.3
AGENT = {"poll_seconds": POLL, "stale_after": 2.0, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"grace_seconds": 1.0, "lease_seconds": 3.0}
RUNNER_GRACE = 5.0  # the command runner's SIGTERM-to-SIGKILL grace
# A table process that starts a child of its own, says where both are, writes a line of output,
# then works for as long as its table is told (or fails, when the "fail" file exists).
TABLE = """
import json, os, subprocess, sys, time
folder, slow = sys.argv[1], sys.argv[2]
table, request = os.environ["FDCORE_TABLE"], os.environ["FDCORE_REQUEST"]
child = subprocess.Popen(["sleep", "120"])
path = os.path.join(folder, f"{request}.{table}.json")
with open(path + ".tmp", "w") as handle:
    json.dump({"pid": os.getpid(), "child": child.pid}, handle)
os.replace(path + ".tmp", path)
print(f"table {table} of {request} under token {os.environ['FDCORE_FENCING_TOKEN']}",
      file=sys.stderr, flush=True)
if os.path.exists(os.path.join(folder, "fail")):
    print("bad row 17", file=sys.stderr)
    sys.exit(3)
time.sleep(120 if table == slow else 0.1)
child.kill()
"""


def command_agents(
    fleet: AgentFleet, tmp_path: Path, slow: str, *names: str, **pipeline: object
) -> Path:
    """Agents running TABLE with the command runner; the folder where tables say they started."""
    started = tmp_path / "started"
    started.mkdir()
    script = tmp_path / "table.py"
    script.write_text(TABLE)
    fleet.env["FDCORE_RUNNER_STATE"] = str(tmp_path / "runner-state")
    runner = {"kind": "command", "command": [sys.executable, str(script), str(started), slow]}
    for name in names:
        sections = {"agent": AGENT, "pipeline": {**PIPELINE, **pipeline}, "runner": runner}
        fleet.add(name, sections).start()
    return started


def tables_started(started: Path, request_id: str) -> list[str]:
    return sorted(p.name.split(".")[1] for p in started.glob(f"{request_id}.*.json"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:  # a zombie is gone too: it runs nothing, only its parent has yet to reap it
        return stat.read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def command(capsys: pytest.CaptureFixture[str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``fdcore ARGV`` run in this process (the agents are the real processes here)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["fdcore", *argv], code, out, err)


def state(mailbox: Mailbox, request_id: str) -> State | None:
    found = mailbox.status(request_id)
    return found.value.state if found else None


@pytest.mark.slow
def test_cancelling_a_running_request_stops_its_processes_and_no_later_table_starts(
    fdcore_fleet: AgentFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    started = command_agents(fleet, tmp_path, "t2", "etl-01")
    submit(mailbox, ["t1", "t2", "t3", "t4", "t5"], request_id="r-five")
    assert wait_until(lambda: tables_started(started, "r-five") == ["t1", "t2"], 30)
    processes = json.loads((started / "r-five.t2.json").read_text())
    cancelled_at = time.monotonic()
    result = run_fdcore(
        "cancel", "r-five", "--env", fleet.environment, "--by", "ann", "--reason", "bad input"
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert "its holder etl-01 stops it at its next poll" in result.stdout
    assert wait_until(lambda: state(mailbox, "r-five") is State.CANCELLED, 30)
    # Within one poll plus the runner's grace (and the time a poll takes on a loaded machine).
    assert time.monotonic() - cancelled_at < POLL + RUNNER_GRACE + 1.5
    assert wait_until(lambda: not alive(processes["pid"]) and not alive(processes["child"]), 5)
    time.sleep(3 * POLL)
    assert tables_started(started, "r-five") == ["t1", "t2"]  # no later table started
    status = mailbox.status("r-five").value  # type: ignore[union-attr]
    assert (status.message, status.tables_done) == ("cancelled by ann: bad input", ["t1"])
    assert [(a.agent, a.outcome) for a in status.attempts] == [("etl-01", Outcome.CANCELLED)]
    runs = {run.table: run for run in mailbox.runs("r-five")}
    assert {t: r.outcome for t, r in runs.items()} == {
        "t1": Outcome.SUCCEEDED,
        "t2": Outcome.CANCELLED,
    }
    assert runs["t1"].exit_code == 0 and "table t1 of r-five" in (runs["t1"].output or "")
    refused = command(capsys, "cancel", "r-five", "--env", fleet.environment)
    assert_one_error_line(refused, "request r-five already ended cancelled; nothing to cancel")
    assert fleet.agents["etl-01"].alive
    fleet.stop_all()


@pytest.mark.slow
def test_a_retry_of_a_failed_request_runs_once_and_links_both_ways(
    fdcore_fleet: AgentFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    started = command_agents(fleet, tmp_path, "none", "etl-01", "etl-02")
    (started / "fail").touch()
    submit(mailbox, ["t1", "t2", "t3"], request_id="r-fails")
    assert wait_until(lambda: state(mailbox, "r-fails") is State.FAILED, 30)
    (started / "fail").unlink()
    early = command(capsys, "retry", "r-fails", "--env", fleet.environment, "--from-table", "t9")
    assert_one_error_line(early, "table 't9' is not one of request r-fails's tables (t1, t2, t3)")
    retried = command(capsys, "retry", "r-fails", "--env", fleet.environment, "--json")
    assert retried.returncode == 0, retried.stderr
    retry_id = json.loads(retried.stdout)["request"]
    assert wait_until(lambda: state(mailbox, retry_id) is State.SUCCEEDED, 30)
    time.sleep(3 * POLL)
    old = json.loads(
        command(capsys, "show", "r-fails", "--env", fleet.environment, "--json").stdout
    )
    new = json.loads(command(capsys, "show", retry_id, "--env", fleet.environment, "--json").stdout)
    assert (old["retried_as"], new["retry_of"]) == (retry_id, "r-fails")
    [failed_run] = old["runs"]
    assert (failed_run["exit_code"], failed_run["outcome"]) == (3, "failed")
    assert failed_run["output"].splitlines() == ["table t1 of r-fails under token 1", "bad row 17"]
    assert old["why"] == "table t1 failed: exit code 3: bad row 17"
    # The retry ran once: one attempt, each table once.
    assert [a["outcome"] for a in new["attempts"]] == ["succeeded"]
    assert sorted(run["table"] for run in new["runs"]) == ["t1", "t2", "t3"]
    assert tables_started(started, retry_id) == ["t1", "t2", "t3"]
    again = command(capsys, "retry", "r-fails", "--env", fleet.environment)
    assert_one_error_line(again, f"request r-fails was already retried as {retry_id}")
    fleet.stop_all()


@pytest.mark.slow
def test_show_of_a_taken_over_request_lists_both_attempts_with_their_agents(
    fdcore_fleet: AgentFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    names = ("etl-01", "etl-02")
    started = command_agents(fleet, tmp_path, "t1", *names, claim="when_free", take_over=True)
    submit(mailbox, ["t1", "t2"], request_id="r-moved")
    assert wait_until(lambda: tables_started(started, "r-moved") == ["t1"], 30)
    first = holder(mailbox, "r-moved")
    assert first is not None
    [second] = [name for name in names if name != first]
    (started / "r-moved.t1.json").unlink()
    fleet.agents[first].kill()  # its table process dies with it
    # The slow table runs again under the other agent.
    assert wait_until(lambda: tables_started(started, "r-moved") == ["t1"], 30)
    show = command(capsys, "show", "r-moved", "--env", fleet.environment, "--json")
    story = json.loads(show.stdout)
    assert [(a["agent"], a["outcome"]) for a in story["attempts"]] == [
        (first, "lost"),
        (second, "running"),
    ]
    text = command(capsys, "show", "r-moved", "--env", fleet.environment).stdout
    assert f"1  {first}" in text and f"2  {second}" in text
    command(capsys, "cancel", "r-moved", "--env", fleet.environment)
    assert wait_until(lambda: state(mailbox, "r-moved") is State.CANCELLED, 30)
    fleet.stop_all()
