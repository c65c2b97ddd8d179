"""``fdcore demo`` shows what it promises: an agent killed while it runs work, that work taken
over, every request succeeded once, each slot that did not run explained; it says OK only then.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes


def demo(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fdcore.cli", "demo", "--dir", str(folder), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=400,
    )


@pytest.mark.slow
def test_the_demo_takes_over_the_killed_agents_work_and_explains_every_slot(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "demo"
    result = demo(folder, "--requests", "16")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    killed = re.search(r"killed agent-2 with SIGKILL while it ran (\d+) requests", out)
    assert killed and int(killed[1]) >= 1, out
    assert "restarted agent-2: every request it held was taken over" in out
    moved = re.search(r"taken over from a lost agent: (\d+) requests", out)
    assert moved and int(moved[1]) >= 1, out
    assert "tables that succeeded twice: 0" in out
    slots = re.search(r"schedule 'summary': \d+ slots, one request each: (\{.*\})", out)
    assert slots, out
    not_run = sum(n for state, n in ast.literal_eval(slots[1]).items() if state != "succeeded")
    assert len(re.findall(r"^  slot \d+: \w+: .+", out, re.MULTILINE)) == not_run, out
    assert out.rstrip().splitlines()[-1].startswith("OK: every request succeeded exactly once")


@pytest.mark.slow
def test_the_demo_is_not_ok_without_a_takeover(tmp_path: Path) -> None:
    """One agent: nobody to kill, so nothing is taken over, and the demo says so."""
    result = demo(tmp_path / "demo", "--agents", "1", "--requests", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.rstrip().splitlines()[-1] == "NOT OK: no request was taken over"
