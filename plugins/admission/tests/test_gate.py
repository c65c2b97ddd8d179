"""Host admission ``lanes``: a table runs while its process holds the table's lane."""

from __future__ import annotations

import os
from pathlib import Path

from fdcore_admission.lanes import Lanes

from fdcore.abc import TableJob, TableResult, TableRun
from fdcore.plugins.manager import HOST, load_plugins
from fdcore.testing.memory_fleet import ManualRun


def test_a_table_waits_for_its_lane_and_lets_it_go_when_its_run_ends(tmp_path: Path) -> None:
    gate = load_plugins().get(HOST, "lanes").open(str(tmp_path), {"agent": "a1"})
    assert gate.slots() is None
    lanes = Lanes(tmp_path)
    other = lanes.try_hold("sales")  # another process of the host holds the table's lane
    assert other is not None
    runs: list[ManualRun] = []

    def start(job: TableJob) -> TableRun:
        runs.append(ManualRun(job))
        return runs[-1]

    run = gate.admit(TableJob("r1", "sales", 1, 1, "a1", "file:///env"), start)
    assert run.poll() is None and runs == []  # waits: the lane is held
    os.close(other)
    assert run.poll() is None and len(runs) == 1  # started, holding the lane
    assert lanes.try_hold("sales") is None
    runs[0].result = TableResult(True)
    assert run.poll() == TableResult(True)
    free = lanes.try_hold("sales")  # let go with the run's end
    assert free is not None
    os.close(free)


def test_a_cancelled_run_lets_its_lane_go(tmp_path: Path) -> None:
    gate = load_plugins().get(HOST, "lanes").open(str(tmp_path), {"agent": "a1"})
    runs: list[ManualRun] = []

    def start(job: TableJob) -> TableRun:
        runs.append(ManualRun(job))
        return runs[-1]

    run = gate.admit(TableJob("r1", "sales", 1, 1, "a1", "file:///env"), start)
    assert run.poll() is None
    run.cancel()
    assert runs[0].cancelled
    free = Lanes(tmp_path).try_hold("sales")
    assert free is not None
    os.close(free)
