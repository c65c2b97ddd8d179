"""With host admission ``lanes`` and the command runner, the table process holds its table's lane
while it runs, and a table process never outlives its agent (docs/takeover.md): an agent
SIGKILLed mid-table takes its table process with it, and the lane is free at once, with no
orphan left holding it (real processes, real flock)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fdcore_admission.lanes import Lanes

from fdcore.cli.fleet import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.processes]

TABLE = (
    "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(2); "
    "open(sys.argv[2], 'w').close()"
)

AGENT = """
import sys, time
from fdcore.abc import TableJob
from fdcore.plugins.manager import HOST, RUNNER, load_plugins
folder, started, done = sys.argv[1:]
plugins = load_plugins()
gate = plugins.get(HOST, "lanes").open(folder, {"agent": "a1"})
runner = plugins.get(RUNNER, "command")
command = [sys.executable, "-c", TABLE, started, done]
run = gate.admit(TableJob("r1", "sales", 1, 1, "a1", "file:///env"),
                 lambda job: runner.start(job, {"command": command}))
while run.poll() is None:
    time.sleep(0.05)
"""


def _agent(tmp_path: Path) -> subprocess.Popen[bytes]:
    code = f"TABLE = {TABLE!r}\n" + textwrap.dedent(AGENT)
    started, done = tmp_path / "started", tmp_path / "done"
    return subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(started), str(done)])


def test_the_lane_is_held_while_the_table_runs_and_free_once_it_ends(tmp_path: Path) -> None:
    lanes = Lanes(tmp_path)
    agent = _agent(tmp_path)
    try:
        assert wait_until((tmp_path / "started").exists, 30)
        while not (tmp_path / "done").exists():
            assert not lanes.is_free("sales")
            time.sleep(0.02)
        assert agent.wait(30) == 0
        assert lanes.is_free("sales")
    finally:
        if agent.poll() is None:
            agent.kill()


def test_an_agent_killed_mid_table_takes_its_table_and_the_lane_with_it(tmp_path: Path) -> None:
    lanes = Lanes(tmp_path)
    agent = _agent(tmp_path)
    try:
        assert wait_until((tmp_path / "started").exists, 30)
        assert not lanes.is_free("sales")
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        assert wait_until(lambda: lanes.is_free("sales"), 10)
        time.sleep(2.5)  # the table would have finished by now had it outlived its agent
        assert not (tmp_path / "done").exists()
    finally:
        if agent.poll() is None:
            agent.kill()
