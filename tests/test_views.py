"""What `fdcore queue`, `agents` and `schedules` show, and their warnings."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.main import main
from fdcore.contract.codec import format_time
from fdcore.contract.layout import agent_key, request_key, status_key
from fdcore.contract.models import (
    AgentRecord,
    Attempt,
    Outcome,
    Request,
    ScheduleInfo,
    ScheduleRef,
    State,
    Status,
)
from fdcore.environment import QueueFilter, queue_page
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.access import Mailbox

NOW = datetime.now(timezone.utc)  # for fields whose age does not matter


def now() -> datetime:
    return datetime.now(timezone.utc)


def record(name: str, *schedules: ScheduleInfo, seen: float = 1.0, **fields: object) -> AgentRecord:
    return AgentRecord(
        name=name,
        updated_at=now() - timedelta(seconds=seen),
        stale_after=60,
        schedules=list(schedules),
        **fields,  # type: ignore[arg-type]
    )


def info(shared: bool, when: str = "every 3600s", fingerprint: str = "a") -> ScheduleInfo:
    return ScheduleInfo(
        id="hourly",
        shared=shared,
        when=when,
        entities=["sales"],
        fingerprint=fingerprint,
        next_due=NOW + timedelta(minutes=5),
    )


def environment(*records: AgentRecord) -> Mailbox:
    mailbox = Mailbox(MemoryStorage.fresh(uuid.uuid4().hex))
    for item in records:
        mailbox.create(agent_key(item.name), item)
    return mailbox


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    assert main(list(args)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_properly_shared_schedule_is_not_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    mailbox = environment(record("etl-01", info(True)), record("etl-02", info(True)))
    out, err = run(capsys, "schedules", "--env", mailbox.storage.url)
    assert err == ""
    assert "hourly" in out and "etl-01, etl-02" in out
    out, err = run(capsys, "agents", "--env", mailbox.storage.url)
    assert err == "" and "hourly (shared)" in out


def test_unshared_schedule_on_two_agents_is_scheduled_in_two_places(
    capsys: pytest.CaptureFixture[str],
) -> None:
    mailbox = environment(record("etl-01", info(False)), record("etl-02", info(False)))
    for command in ("queue", "agents", "schedules"):
        _, err = run(capsys, command, "--env", mailbox.storage.url)
        assert err.startswith("warning: Scheduled in two places: schedule hourly is not shared")
        assert "Shared schedule differs" not in err


def test_shared_copies_that_differ_are_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    mailbox = environment(
        record("etl-01", info(True, "every 3600s", "a")),
        record("etl-02", info(True, "every 1800s", "b")),
    )
    out, _ = run(capsys, "schedules", "--env", mailbox.storage.url, "--json")
    document = json.loads(out)
    assert document["warnings"] == [
        "Shared schedule differs: schedule hourly: etl-01: shared, every 3600s, tables sales; "
        "etl-02: shared, every 1800s, tables sales"
    ]


def test_stopped_agents_copies_do_not_count(capsys: pytest.CaptureFixture[str]) -> None:
    mailbox = environment(
        record("etl-01", info(False)), record("etl-02", info(False), stopped_at=NOW)
    )
    _, err = run(capsys, "agents", "--env", mailbox.storage.url)
    assert err == ""


def test_queue_shows_shared_by_and_attempts(capsys: pytest.CaptureFixture[str]) -> None:
    lost = record("etl-01", info(True), seen=600)
    mailbox = environment(lost, record("etl-02", info(True)))
    request = Request(
        id="sched-hourly-1",
        entities=["sales"],
        created_at=NOW,
        schedule=ScheduleRef(id="hourly", slot="1"),
    )
    mailbox.create(request_key(request.id), request)
    status = Status(
        request=request.id,
        state=State.RUNNING,
        agent="etl-02",
        updated_at=NOW,
        attempt=2,
        attempts=[
            Attempt(number=1, agent="etl-01", started_at=NOW, outcome=Outcome.LOST),
            Attempt(number=2, agent="etl-02", started_at=NOW),
        ],
    )
    mailbox.create(status_key(request.id), status)
    out, _ = run(capsys, "queue", "--env", mailbox.storage.url)
    line = next(line for line in out.splitlines() if line.startswith("sched-hourly-1"))
    assert "etl-01 lost, etl-02 running" in line
    assert "hourly slot 1 (Shared by etl-01, etl-02)" in line
    out, _ = run(capsys, "agents", "--env", mailbox.storage.url, "--json")
    states = {row["name"]: row["state"] for row in json.loads(out)["agents"]}
    assert states == {"etl-01": "lost", "etl-02": "live"}
    out, _ = run(capsys, "queue", "--env", mailbox.storage.url, "--json")
    [row] = json.loads(out)["requests"]
    assert row["attempts"] == [
        {"number": 1, "agent": "etl-01", "outcome": "lost"},
        {"number": 2, "agent": "etl-02", "outcome": "running"},
    ]


def test_queue_json_shows_each_attempt_by_number_agent_and_outcome(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One typed attempt under the queue and the story; ``queue --json`` keeps its three keys,
    ``show --json`` its six, and a status of an older agent (no attempt list) the one it
    implies."""
    mailbox = environment(record("etl-01", info(True)))
    for request_id, status in (
        (
            "r-new",
            Status(
                request="r-new",
                state=State.FAILED,
                agent="etl-01",
                updated_at=NOW,
                attempt=1,
                attempts=[
                    Attempt(
                        number=1,
                        agent="etl-01",
                        started_at=NOW,
                        ended_at=NOW,
                        outcome=Outcome.FAILED,
                        message="sales: exit code 2",
                    )
                ],
            ),
        ),
        ("r-old", Status(request="r-old", state=State.RUNNING, agent="etl-01", updated_at=NOW)),
    ):
        mailbox.create(
            request_key(request_id), Request(id=request_id, entities=["sales"], created_at=NOW)
        )
        mailbox.create(status_key(request_id), status)
    out, _ = run(capsys, "queue", "--env", mailbox.storage.url, "--json")
    rows = {row["id"]: row["attempts"] for row in json.loads(out)["requests"]}
    assert rows == {
        "r-new": [{"number": 1, "agent": "etl-01", "outcome": "failed"}],
        "r-old": [{"number": 1, "agent": "etl-01", "outcome": "running"}],
    }
    out, _ = run(capsys, "show", "r-new", "--env", mailbox.storage.url, "--json")
    when = format_time(NOW)
    assert json.loads(out)["attempts"] == [
        {
            "number": 1,
            "agent": "etl-01",
            "started_at": when,
            "ended_at": when,
            "outcome": "failed",
            "message": "sales: exit code 2",
        }
    ]
    page = queue_page(queue_rows(mailbox), QueueFilter(agent="etl-01"), 0, 10)
    assert sorted(row.id for row in page.rows) == ["r-new", "r-old"] and page.agents == ["etl-01"]
