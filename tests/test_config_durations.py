"""agent.toml durations are checked for meaning: finite, positive, bounded, consistent.

Each of these was accepted once and broke an agent later: a negative grace let an agent take a
healthy agent's request over, ``inf`` was written into the agent record as ``Infinity``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fdcore.cli.config import load_config
from fdcore.errors import ConfigError

HEAD = '[agent]\nname = "a"\nenvironment = "x"\n'


def config_with(tmp_path: Path, agent: str = "", pipeline: str = "") -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(f"{HEAD}{agent}\n[pipeline]\n{pipeline}\n")
    return path


@pytest.mark.parametrize(
    ("agent", "pipeline", "expected"),
    [
        ("poll_seconds = nan", "", "[agent] poll_seconds: must be a finite number of seconds"),
        ("poll_seconds = inf", "", "[agent] poll_seconds: must be a finite number of seconds"),
        ("poll_seconds = -1", "", "[agent] poll_seconds: must be at least 0.01, got -1"),
        ("poll_seconds = 0.0001", "", "[agent] poll_seconds: must be at least 0.01"),
        ("stale_after = inf", "", "[agent] stale_after: must be a finite number of seconds"),
        ("stale_after = 1e300", "", "[agent] stale_after: must be at most 3.1536e+08 (10 years)"),
        ("stale_after = 0", "", "[agent] stale_after: must be at least 0.1, got 0"),
        (
            "poll_seconds = 30\nstale_after = 60",
            "",
            "[agent] poll_seconds: must be at most stale_after / 3 (20), got 30",
        ),
        ("shutdown_grace = -5", "", "[agent] shutdown_grace: must be 0 or more, got -5"),
        ("shutdown_grace = nan", "", "[agent] shutdown_grace: must be a finite number"),
        ("", "grace_seconds = -100", "[pipeline] grace_seconds: must be 0 or more, got -100"),
        ("", "grace_seconds = inf", "[pipeline] grace_seconds: must be a finite number"),
        ("", "lease_seconds = -1", "[pipeline] lease_seconds: must be at least 15, got -1"),
        (
            "poll_seconds = 1",
            "lease_seconds = 2",
            "[pipeline] lease_seconds: must be at least 3, got 2",
        ),
        ("", "lease_seconds = nan", "[pipeline] lease_seconds: must be a finite number"),
    ],
)
def test_a_duration_without_meaning_is_one_line_naming_file_and_key(
    tmp_path: Path, agent: str, pipeline: str, expected: str
) -> None:
    path = config_with(tmp_path, agent, pipeline)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_sane_durations_are_taken_as_given(tmp_path: Path) -> None:
    path = config_with(
        tmp_path,
        "poll_seconds = 0.5\nstale_after = 2\nshutdown_grace = 0",
        "grace_seconds = 0\nlease_seconds = 1.5",
    )
    config = load_config(path)
    assert (config.poll_seconds, config.stale_after, config.shutdown_grace) == (0.5, 2.0, 0.0)
    assert (config.grace_seconds, config.lease_seconds) == (0.0, 1.5)


def test_an_agent_with_a_negative_grace_does_not_start(tmp_path: Path) -> None:
    """A real ``fdcore agent run``: it once took over healthy agents' requests."""
    env = (tmp_path / "env").as_uri()
    path = tmp_path / "agent.toml"
    path.write_text(
        f'[agent]\nname = "a"\nenvironment = "{env}"\n'
        '[pipeline]\ntake_over = true\ngrace_seconds = -100\n[runner]\ncommand = ["true"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", "agent", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"fdcore: error: {path}: [pipeline] grace_seconds: must be 0 or more, got -100"
    ]
    assert not (tmp_path / "env").exists()
