"""The side-by-side benchmark's machinery (benchmarks/peers): its duplicate count from the
tables' own log, and a tiny drain of real fdcore agents (and of huey, where installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peers import peers


def test_duplicates_are_counted_from_the_tables_log_and_a_torn_line_is_left_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "tables.log").write_text(
        "r1 t1-a 10.0 10.5\nr1 t1-b 10.6 10.7\nr1 t1-a 11.0 11.2\nr2 t2-a 12.0 12.1\nr2 t2"
    )
    runs = peers.table_runs(tmp_path)
    assert [(run[0], run[1]) for run in runs] == [
        ("r1", "t1-a"),
        ("r1", "t1-b"),
        ("r1", "t1-a"),
        ("r2", "t2-a"),
    ]
    assert peers.ran_twice(runs) == 1
    assert peers.table_runs(tmp_path / "nothing") == []


@pytest.mark.processes
@pytest.mark.parametrize("system", ["fdcore", "huey"])
def test_a_tiny_drain_runs_every_table_once_and_reports_its_figures(
    system: str, tmp_path: Path
) -> None:
    if system == "huey":
        pytest.importorskip("huey", reason="the peers extra is not installed")
    out = tmp_path / "runs.jsonl"
    arguments = ["drain", "--systems", system, "--runs", "1", "--requests", "4"]
    peers.main([*arguments, "--settle", "2", "--timeout", "120", "--out", str(out)])
    [result] = [json.loads(line) for line in out.read_text().splitlines()]
    assert result["system"] == system and result["parameters"]["requests"] == 4
    figures = result["figures"]
    assert figures["ran_twice"] == 0, figures
    assert figures["requests_per_s"] > 0 and figures["cpu_ms_per_request"] > 0
    # every process on the machine over the drain's span: a tiny drain's may round to 0 ticks
    assert figures["machine_cpu_ms_per_request"] >= 0


def test_the_machine_cpu_at_a_moment_lies_on_the_line_between_its_samples() -> None:
    samples = [(10.0, 100.0), (10.5, 101.0), (11.0, 103.0)]
    assert peers.cpu_at(samples, 10.25) == pytest.approx(100.5)
    assert peers.cpu_at(samples, 10.75) == pytest.approx(102.0)
    assert peers.cpu_at(samples, 10.5) == 101.0
    assert peers.cpu_at(samples, 9.0) == 100.0  # before the first sample: the first
    assert peers.cpu_at(samples, 12.0) == 103.0  # after the last: the last
    assert peers.machine_cpu() > 0
