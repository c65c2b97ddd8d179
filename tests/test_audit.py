"""The audit trail: one event per workload action, written create-only into ``audit/``, read
bounded and checked; forged, oversized and malformed files are shown untrusted, with why."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage

from fdcore.cli.main import main
from fdcore.contract.codec import encode
from fdcore.contract.layout import audit_key
from fdcore.contract.models import AuditEvent, State
from fdcore.environment import AuditPage, AuditRow, Environment
from fdcore.environment.actions import operator_name
from fdcore.errors import RequestError
from fdcore.mailbox.audit import AuditLog, archive_old_events, new_event_id, record, time_of_id
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    LocalFolderStorage(tmp_path / "env", create=True)
    return tmp_path / "env"


def actions(rows: list[AuditRow]) -> list[tuple[str, str, str, str, str]]:
    return [
        (r.event.action, r.event.subject, r.event.actor, r.event.via, r.event.outcome)
        for r in rows
        if r.event is not None
    ]


def test_each_action_of_the_python_api_is_one_trusted_event(folder: Path) -> None:
    me = operator_name()
    with Environment.open(str(folder)) as environment:
        environment.submit(["sales"], id="r1", actor="svc-orchestrator")
        environment.submit(["sales"], id="r1", actor="svc-orchestrator")  # the same: no new work
        environment.cancel("r1", reason="wrong day")
        environment.retry("r1", id_of_retry="r1-again", by="ann")
        with pytest.raises(RequestError):
            environment.retry("r1", by="bob")  # retried already: refused, and recorded so
        page = environment.audit()
        rows = page.rows
    assert isinstance(page, AuditPage) and not page.left_off
    assert actions(rows) == [
        ("submit", "r1", "svc-orchestrator", "python", "ok"),
        ("submit", "r1", "svc-orchestrator", "python", "exists"),
        ("cancel", "r1", me, "python", "cancelled"),
        ("retry", "r1", "ann", "python", "ok: r1-again"),
        ("retry", "r1", "bob", "python", rows[-1].event.outcome),  # type: ignore[union-attr]
    ]
    assert rows[-1].event is not None and rows[-1].event.outcome.startswith("refused: ")
    assert all(row.trusted for row in rows)
    # who wrote it, beside who the caller said acted
    assert rows[0].event is not None and rows[0].event.process == me
    assert rows[0].event.detail == "tables sales" and rows[0].event.request == "r1"


def test_a_bad_actor_is_refused_before_anything_is_written(folder: Path) -> None:
    with Environment.open(str(folder)) as environment:
        for actor in ("", "ann\nroot", "x" * 513):
            with pytest.raises(ValueError, match="actor must be"):
                environment.submit(["sales"], id="r1", actor=actor)
        assert environment.audit().rows == []
        assert environment.mailbox.request("r1") is None
    with pytest.raises(ValueError, match="via must be"):
        Environment.open(str(folder), via="agent")


def test_fdcore_audit_filters_and_prints_json_lines(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["submit", "--env", str(folder), "--entities", "a", "--id", "r1"]) == 0
    assert main(["submit", "--env", str(folder), "--entities", "b", "--id", "r2"]) == 0
    assert main(["cancel", "--env", str(folder), "r2", "--by", "ann"]) == 0
    capsys.readouterr()
    assert main(["audit", "--env", str(folder), "--json", "--request", "r2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["action"], e["actor"], e["via"], e["trusted"]) for e in lines] == [
        ("submit", operator_name(), "cli", True),
        ("cancel", "ann", "cli", True),
    ]
    assert lines[1]["process"] == operator_name()  # --by said ann; the process is who ran it
    assert main(["audit", "--env", str(folder), "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split()[2:4] == ["cancel", "r2"] and "left out" in err
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    assert main(["audit", "--env", str(folder), "--since", later]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    assert main(["audit", "--env", str(folder), "--since", "1h"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 3
    assert main(["audit", "--env", str(folder), "--since", "yesterday"]) != 0
    assert "--since: expected an ISO 8601 time or a duration" in capsys.readouterr().err


def _write(folder: Path, name: str, data: bytes) -> None:
    (folder / "audit").mkdir(exist_ok=True)
    (folder / "audit" / name).write_bytes(data)


def test_forged_oversized_and_malformed_files_are_shown_untrusted(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(timezone.utc)
    storage = LocalFolderStorage(folder)
    with Environment.open(str(folder)) as environment:
        environment.submit(["sales"], id="r1")
        mailbox = environment.mailbox
    good_id = new_event_id(now)
    # backdated: claims a time a year before the store wrote it (name and field agree)
    old = now - timedelta(days=365)
    backdated = AuditEvent(new_event_id(old), "cancel", "r1", "ann", "cli", old, request="r1")
    _write(folder, f"{backdated.id}.json", encode(backdated))
    # an "agent" event whose actor is no agent name, under a name that is not its id
    forged = AuditEvent(good_id, "takeover", "r1", "../root", "agent", now, request="r1")
    _write(folder, f"{new_event_id(now)}.json", encode(forged))
    _write(folder, f"{new_event_id(now)}.json", b"{" + b" " * 5000 + b"}")  # oversized
    _write(folder, f"{new_event_id(now)}.json", b'{"id": 1}')  # malformed
    _write(folder, "notes.txt", b"hello")  # no event's name
    rows = AuditLog(type(mailbox)(storage)).read().rows
    trusted = [row for row in rows if row.trusted]
    assert actions(trusted) == [("submit", "r1", operator_name(), "python", "ok")]
    problems = {row.key: " ".join(row.problems) for row in rows if not row.trusted}
    assert len(problems) == 5
    text = " | ".join(problems.values())
    assert "but the store wrote it at" in text  # the backdated one
    assert "is not its file name" in text and "is no agent name" in text  # the forged one
    assert "bytes" in text  # the oversized one: not read
    assert "audit/notes.txt: not an audit file name" in text
    assert main(["audit", "--env", str(folder)]) == 0
    assert capsys.readouterr().out.count("UNTRUSTED") == 5
    assert main(["audit", "--env", str(folder), "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(e["trusted"] for e in shown) == [False] * 5 + [True]


def test_agents_record_takeovers_and_expiries(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    mailbox = fleet.mailbox
    first = fleet.agent("etl-01", take_over=True, stale_after=10.0, poll_seconds=1.0)
    second = fleet.agent("etl-02", take_over=True, stale_after=10.0, poll_seconds=1.0)
    submit(mailbox, ["sales"], request_id="r1", now=START)
    first.poll()  # claims r1
    late = START + timedelta(seconds=1)
    submit(mailbox, ["stock"], request_id="late", now=START, deadline=late)
    fleet.clock.advance(120)  # etl-01 goes silent: lost; the deadline of "late" passed
    second.poll()
    second.poll()
    status = mailbox.status("r1")
    assert status is not None and status.value.agent == "etl-02"
    late_status = mailbox.status("late")
    assert late_status is not None and late_status.value.state is State.EXPIRED
    rows = AuditLog(mailbox).read().rows
    got = {(e[0], e[1], e[2], e[3]) for e in actions(rows)}
    assert got == {("takeover", "r1", "etl-02", "agent"), ("expire", "late", "etl-02", "agent")}
    [takeover] = [r.event for r in rows if r.event and r.event.action == "takeover"]
    assert takeover.detail is not None and takeover.detail.startswith("from etl-01")


def test_retention_archives_old_events_to_their_day(folder: Path) -> None:
    storage = LocalFolderStorage(folder)
    with Environment.open(str(folder)) as environment:
        mailbox = environment.mailbox
    now = datetime(2026, 9, 10, tzinfo=timezone.utc)
    old = record(mailbox, "submit", "r1", actor="ann", via="cli", at=now - timedelta(days=8))
    young = record(mailbox, "submit", "r2", actor="ann", via="cli", at=now - timedelta(days=1))
    assert old is not None and young is not None
    aged = archive_old_events(mailbox, now, 7 * 86400.0, True, 100)
    assert aged.moved == 1 and aged.next_due == young.at + timedelta(days=7)
    assert list(storage.list("audit/")) == [audit_key(young.id)]
    assert list(storage.list("archive/")) == [f"archive/2026/09/02/audit/{old.id}.json"]
    aged = archive_old_events(mailbox, now + timedelta(days=7), 7 * 86400.0, False, 100)
    assert aged.moved == 1 and list(storage.list("audit/")) == []  # deleted, archive = false


def test_record_action_takes_only_the_trails_actions(folder: Path) -> None:
    with Environment.open(str(folder), via="cli") as environment:
        with pytest.raises(ValueError, match="action must be one of"):
            environment.record_action("reboot", "box-1")
        environment.record_action("set-slots", "/srv/host", actor="ann", detail="1 -> 3 slot(s)")
        [row] = environment.audit().rows
    assert row.trusted and actions([row]) == [("set-slots", "/srv/host", "ann", "cli", "ok")]


def test_one_process_names_its_events_in_the_order_it_writes_them() -> None:
    # Events of one millisecond sort by name as they were written, not by their random bits.
    at = datetime(2026, 9, 1, 3, 20, tzinfo=timezone.utc)
    names = [new_event_id(at) for _ in range(50)]
    assert names == sorted(names) and len(set(names)) == 50
    named = [time_of_id(name) for name in names]
    assert all(t is not None and at <= t < at + timedelta(seconds=1) for t in named)
    # a clock far behind (another simulated world) names from its own time
    earlier = at - timedelta(hours=1)
    assert time_of_id(new_event_id(earlier)) == earlier
