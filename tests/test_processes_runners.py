"""A table process never outlives its agent: real agents, real table processes, SIGKILL.

The table processes log a tick every 50 ms to an append-only file of their own; two processes of
one table ticking at the same time are two writers.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fdcore.builtin import processes
from fdcore.builtin.processes import ProcessRecords, table_process
from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.2, "stale_after": 3.0, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"grace_seconds": 1.0, "lease_seconds": 3.0}
TABLE = """
import json, os, sys, time
log, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
while time.monotonic() < end:
    with open(log, "a") as handle:
        handle.write(json.dumps({"pid": os.getpid(), "t": time.monotonic()}) + "\\n")
    time.sleep(0.05)
"""


def ticks(log: Path) -> dict[int, list[float]]:
    by_process: dict[int, list[float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        tick = json.loads(line)
        by_process.setdefault(tick["pid"], []).append(tick["t"])
    return by_process


def overlaps(log: Path) -> list[tuple[int, int, float]]:
    """Pairs of table processes that ticked at the same time, with how long they overlapped."""
    spans = sorted((min(t), max(t), pid) for pid, t in ticks(log).items())
    return [
        (pid, later_pid, min(end, later_end) - later_start)
        for (_, end, pid), (later_start, later_end, later_pid) in itertools.combinations(spans, 2)
        if later_start < end
    ]


def table_agent(fleet: AgentFleet, tmp_path: Path, command: list[str]) -> AgentProcess:
    fleet.env["FDCORE_RUNNER_STATE"] = str(tmp_path / "runner-state")
    runner = {"kind": "command", "command": command}
    return fleet.add("etl-01", {"agent": AGENT, "pipeline": PIPELINE, "runner": runner})


def script(tmp_path: Path) -> str:
    path = tmp_path / "table.py"
    path.write_text(TABLE)
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("setpriv", [True, False], ids=["setpriv", "preexec_fn"])
def test_a_killed_agents_table_process_dies_with_it(
    fdcore_fleet: AgentFleet, tmp_path: Path, setpriv: bool
) -> None:
    """Both ways a table process is started: through ``setpriv`` where it is installed, and
    with the agent's own ``preexec_fn`` where it is not (a PATH without it)."""
    if setpriv and processes._setpriv() is None:
        pytest.skip("util-linux's setpriv with --pdeathsig is not installed")
    if not setpriv:
        fdcore_fleet.env["PATH"] = str(tmp_path / "no-programs")
    log = tmp_path / "ticks.jsonl"
    agent = table_agent(fdcore_fleet, tmp_path, [sys.executable, script(tmp_path), str(log), "30"])
    submit(fdcore_fleet.mailbox, ["sales"], request_id="r1")
    agent.start()
    assert wait_until(lambda: len(ticks(log)) == 1, 20)
    agent.kill()
    time.sleep(1.0)
    [(pid, before)] = ticks(log).items()
    time.sleep(1.0)
    assert ticks(log)[pid] == before, "the table process ran on after its agent was killed"


@pytest.mark.slow
def test_an_agent_restarted_at_once_ends_what_its_killed_instance_left(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    """The table process is a grandchild (``sh -c '...; true'``): the death signal reaches only
    the shell, so the restarted agent must end the group it recorded before it resumes."""
    log = tmp_path / "ticks.jsonl"
    table = f"{sys.executable} {script(tmp_path)} {log} 8; true"
    agent = table_agent(fdcore_fleet, tmp_path, ["sh", "-c", table])
    mailbox = fdcore_fleet.mailbox
    submit(mailbox, ["sales"], request_id="r1")
    agent.start()
    try:
        assert wait_until(lambda: len(ticks(log)) == 1, 20)
        time.sleep(2.5)
        agent.kill()
        agent.start()  # at once, under the same name: it resumes the request
        assert wait_until(
            lambda: mailbox.status("r1").value.state is State.SUCCEEDED,  # type: ignore[union-attr]
            30,
        ), agent.output()
    finally:
        fdcore_fleet.stop_all()
    assert len(ticks(log)) == 2
    assert overlaps(log) == []
    assert "ending table process group" in agent.output()


def test_a_recorded_pid_now_another_process_is_left_alone(tmp_path: Path) -> None:
    records = ProcessRecords("etl-01", "file:///env", tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        records.add(other.pid)
        record = records.folder / f"{other.pid}.json"
        # The recorded start time is not this process's: its pid was reused since.
        record.write_text(json.dumps({"pid": other.pid, "start_time": 1}))
        assert records.end_leftovers() == 0
        assert other.poll() is None and not record.exists()
    finally:
        other.kill()
        other.wait()


def test_a_recorded_group_still_running_is_ended(tmp_path: Path) -> None:
    records = ProcessRecords("etl-01", "file:///env", tmp_path)
    leader = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    records.add(leader.pid)
    assert ProcessRecords("etl-02", "file:///env", tmp_path).end_leftovers() == 0
    assert records.end_leftovers() == 1
    assert leader.wait(5) == -signal.SIGKILL
    assert records.end_leftovers() == 0


def test_a_record_is_kept_though_a_cleaner_removed_the_records_folder(tmp_path: Path) -> None:
    """The folder is made once; one removed since (a cleaner of the temporary folder) is made
    again, so a table started after it is still ended at the agent's next start."""
    records = ProcessRecords("etl-01", "file:///env", tmp_path / "state")
    records.add(os.getpid())
    records.remove(os.getpid())
    records.folder.rmdir()
    (tmp_path / "state").rmdir()
    leader = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    records.add(leader.pid)
    assert records.end_leftovers() == 1
    assert leader.wait(5) == -signal.SIGKILL


def test_a_table_process_whose_agent_died_before_the_signal_was_armed_exits(
    tmp_path: Path,
) -> None:
    """The shell ``setpriv`` execs checks its parent is the agent that started it: here it
    is told another pid, as if the agent had died and the process been handed to another."""
    if processes._setpriv() is None:
        pytest.skip("util-linux's setpriv with --pdeathsig is not installed")
    marker = tmp_path / "ran"
    argv, options = table_process(["touch", str(marker)], {"PATH": "/usr/bin:/bin"}, None)
    assert argv[argv.index("sh") + 1] == str(os.getpid())  # the agent's pid, for the check
    ran = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, check=False, **options)
    assert ran.returncode == 0 and marker.exists()
    marker.unlink()
    argv[argv.index("sh") + 1] = "1"  # a parent other than the agent
    orphan = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, check=False, **options)
    assert orphan.returncode == 1 and not marker.exists()


def test_a_missing_program_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """As ``Popen`` refuses it, though the program it runs is ``setpriv``."""
    if processes._setpriv() is None:
        pytest.skip("util-linux's setpriv with --pdeathsig is not installed")
    for program in ("no-such-table-program", "./no-such-script.sh"):
        with pytest.raises(FileNotFoundError, match=f"No such file or directory: '{program}'"):
            table_process([program], {"PATH": str(tmp_path)}, str(tmp_path))
