"""``fdcore host`` as an operator runs it, and the ``slots`` admission as the agent uses it."""

from __future__ import annotations

import json
import socket
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fdcore_hostslots.host import Host

from fdcore.abc import HostSlots, TableJob, TableResult, TableRun
from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.main import main
from fdcore.contract.layout import agent_key
from fdcore.contract.models import AgentRecord
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import HOST, load_plugins
from fdcore.testing.memory_fleet import ManualRun


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
    assert code == 0 and "migrated to layout 3 with 2 slot(s)" in out


def job(request: str, table: str) -> TableJob:
    return TableJob(request, table, 1, 1, "a1", "file:///env")


def test_slots_admission_waits_for_a_slot_and_frees_it_at_the_end(tmp_path: Path) -> None:
    Host(tmp_path).init()
    gate = (
        load_plugins().get(HOST, "slots").open(str(tmp_path), {"agent": "a1", "lease_seconds": 30})
    )
    started: list[ManualRun] = []

    def start(job: TableJob) -> TableRun:
        started.append(ManualRun(job))
        return started[-1]

    assert gate.slots() == HostSlots(1, 0)
    first = gate.admit(job("r1", "t1"), start)
    second = gate.admit(job("r2", "t2"), start)
    assert first.poll() is None and len(started) == 1  # running in the one slot
    assert gate.slots() == HostSlots(1, 1)
    assert second.poll() is None and len(started) == 1  # waits: CAPACITY_BUSY
    started[0].result = TableResult(True)
    assert first.poll() == TableResult(True)
    assert gate.slots() == HostSlots(1, 0)
    assert second.poll() is None and len(started) == 2  # admitted now
    second.cancel()
    assert started[1].cancelled and gate.slots() == HostSlots(1, 0)


def test_slots_admission_runs_nothing_on_an_unusable_host(tmp_path: Path) -> None:
    Host(tmp_path).init()
    gate = (
        load_plugins().get(HOST, "slots").open(str(tmp_path), {"agent": "a1", "lease_seconds": 30})
    )
    (tmp_path / "capacity.json").write_text('{"slot_count": 0}')
    assert gate.slots() == HostSlots(0, 0)  # fail closed: no free slot
    run = gate.admit(job("r1", "t1"), lambda job: pytest.fail("started on an unusable host"))
    assert run.poll() is None


def test_fdcore_agents_shows_the_host_slots_of_this_machines_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path)
    host.init()
    host.set_slots(3)
    host.acquire(holder="here", request="r1", table="t", scope="task", lease_seconds=30)
    mailbox = Mailbox(MemoryStorage.fresh(uuid.uuid4().hex))
    for name, machine in (("here", socket.gethostname()), ("there", "another-machine")):
        seen = datetime.now(timezone.utc)
        mailbox.create(agent_key(name), AgentRecord(name, seen, 60.0, host=machine))
    url = mailbox.storage.url
    code, out, _ = fdcore(capsys, "agents", "--env", url, "--host", str(tmp_path), "--json")
    assert code == 0
    slots = {a["name"]: (a["busy_slots"], a["configured_slots"]) for a in json.loads(out)["agents"]}
    assert slots == {"here": (1, 3), "there": (None, None)}
    code, out, _ = fdcore(capsys, "agents", "--env", url, "--host", str(tmp_path))
    assert "HOST SLOTS" in out and " 1/3 " in out
    code, out, _ = fdcore(capsys, "agents", "--env", url, "--json")  # no --host: not shown
    assert all(a["configured_slots"] is None for a in json.loads(out)["agents"])


def test_set_slots_with_env_is_one_audit_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fdcore.environment import Environment

    host, env = str(tmp_path / "host"), str(tmp_path / "env")
    assert fdcore(capsys, "init", env)[0] == 0
    assert fdcore(capsys, "host", "init", "--host", host)[0] == 0
    assert fdcore(capsys, "host", "set-slots", "3", "--host", host, "--env", env)[0] == 0
    Host(host).acquire(holder="a1", request="r1", table="t", scope="task", lease_seconds=30)
    Host(host).acquire(holder="a2", request="r2", table="u", scope="task", lease_seconds=30)
    refused = fdcore(capsys, "host", "set-slots", "1", "--host", host, "--env", env)
    assert refused[0] != 0
    with Environment.open(env) as environment:
        rows = environment.audit().rows
    events = [row.event for row in rows if row.event is not None and row.trusted]
    assert [(e.action, e.subject, e.via) for e in events] == [("set-slots", host, "cli")] * 2
    assert events[0].detail == "1 -> 3 slot(s)" and events[0].outcome == "ok"
    assert events[1].outcome.startswith("refused: ")
