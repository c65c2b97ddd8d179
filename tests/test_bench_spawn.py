"""The table-start benchmark (benchmarks/bench_spawn.py) starts the command every way it
compares, each as often as asked, and reports one line per way."""

from __future__ import annotations

from pathlib import Path

import bench_spawn
import pytest


@pytest.mark.processes
def test_every_way_starts_the_command_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "started"
    table = tmp_path / "table.sh"
    table.write_text(f"#!/bin/sh\necho $$ >> {log}\n")
    table.chmod(0o755)
    bench_spawn.main(["--starts", "3", "--rounds", "2", "--command", str(table)])
    ways = ("plain", "fdcore", "preexec", "helper")
    assert len(log.read_text().split()) == len(ways) * 3 * 2
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == list(ways)
