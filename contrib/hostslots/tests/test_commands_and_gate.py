"""``fdcore host`` as an operator runs it, and the ``slots`` admission as the agent uses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fdcore_hostslots.host import Host

from fdcore.abc import TableJob, TableResult, TableRun
from fdcore.cli.main import main
from fdcore.plugins.manager import HOST, load_plugins


def fdcore(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_host_commands_init_set_slots_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = str(tmp_path / "host")
    assert fdcore(capsys, "host", "init", "--host", host)[0] == 0
    assert fdcore(capsys, "host", "set-slots", "3", "--host", host)[0] == 0
    code, out, _ = fdcore(capsys, "host", "probe", "--host", host, "--json")
    assert code == 0
    assert json.loads(out) == {"configured_slots": 3, "busy_slots": 0, "free": True, "leases": []}
    Host(host).acquire(holder="a1", request="r1", table="t", scope="task", lease_seconds=30)
    code, out, _ = fdcore(capsys, "host", "probe", "--host", host)
    assert "configured_slots 3\nbusy_slots 1\nfree yes\nslot 0: task request r1 table t" in out


@pytest.mark.parametrize("count", ["0", "9", "02x"])
def test_set_slots_refusal_is_one_line_with_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: str
) -> None:
    host = str(tmp_path)
    fdcore(capsys, "host", "init", "--host", host)
    code, _, err = fdcore(capsys, "host", "set-slots", count, "--host", host)
    assert code == 2
    assert err.count("\n") == 1 and "HOST_SLOT_CAPACITY_INVALID" in err


def test_migrate_command_on_an_outdated_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "layout.json").write_text('{"version": 1}')
    (tmp_path / "capacity.json").write_text('{"desired": 2, "effective": 2}')
    code, _, err = fdcore(capsys, "host", "probe", "--host", str(tmp_path))
    assert code == 2 and "HOST_LAYOUT_OUTDATED" in err
    code, out, _ = fdcore(capsys, "host", "migrate", "--host", str(tmp_path))
    assert code == 0 and "migrated to layout 2 with 2 slot(s)" in out


class FakeRun:
    def __init__(self) -> None:
        self.result: TableResult | None = None
        self.cancelled = False

    def poll(self) -> TableResult | None:
        return self.result

    def cancel(self) -> None:
        self.cancelled = True


def job(request: str, table: str) -> TableJob:
    return TableJob(request, table, 1, 1, "a1", "file:///env")


def test_slots_admission_waits_for_a_slot_and_frees_it_at_the_end(tmp_path: Path) -> None:
    Host(tmp_path).init()
    gate = (
        load_plugins().get(HOST, "slots").open(str(tmp_path), {"agent": "a1", "lease_seconds": 30})
    )
    started: list[FakeRun] = []

    def start(job: TableJob) -> TableRun:
        started.append(FakeRun())
        return started[-1]

    assert gate.free_slots() == 1
    first = gate.admit(job("r1", "t1"), start)
    second = gate.admit(job("r2", "t2"), start)
    assert first.poll() is None and len(started) == 1  # running in the one slot
    assert gate.free_slots() == 0
    assert second.poll() is None and len(started) == 1  # waits: CAPACITY_BUSY
    started[0].result = TableResult(True)
    assert first.poll() == TableResult(True)
    assert gate.free_slots() == 1
    assert second.poll() is None and len(started) == 2  # admitted now
    second.cancel()
    assert started[1].cancelled and gate.free_slots() == 1


def test_slots_admission_runs_nothing_on_an_unusable_host(tmp_path: Path) -> None:
    Host(tmp_path).init()
    gate = (
        load_plugins().get(HOST, "slots").open(str(tmp_path), {"agent": "a1", "lease_seconds": 30})
    )
    (tmp_path / "capacity.json").write_text('{"slot_count": 0}')
    assert gate.free_slots() == 0
    run = gate.admit(job("r1", "t1"), lambda job: pytest.fail("started on an unusable host"))
    assert run.poll() is None
