"""With host admission ``lanes`` and the command runner, the table process holds its table's lane:
released when it exits, not when its agent is SIGKILLed (real processes, real flock)."""

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

pytestmark = pytest.mark.slow

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


def test_the_table_process_keeps_the_lane_after_its_agent_is_killed(tmp_path: Path) -> None:
    started, done = tmp_path / "started", tmp_path / "done"
    lanes = Lanes(tmp_path)
    code = f"TABLE = {TABLE!r}\n" + textwrap.dedent(AGENT)
    agent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(started), str(done)])
    try:
        assert wait_until(started.exists, 30)
        assert not lanes.is_free("sales")
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        assert not done.exists()
        assert not lanes.is_free("sales"), "the lane went with the agent, not with its table"
        while not done.exists():
            assert not lanes.is_free("sales")
            time.sleep(0.02)
        assert wait_until(lambda: lanes.is_free("sales"), 10)  # free once the table exited
    finally:
        if agent.poll() is None:
            agent.kill()
