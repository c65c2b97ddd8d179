"""Contract 1: hand-written fixtures parse, keep unknown fields and match docs/contracts.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdcore.contract.codec import decode, encode
from fdcore.contract.models import (
    AgentRecord,
    ArchiveEntry,
    AuditEvent,
    Cancel,
    IncidentDocument,
    Lease,
    Outcome,
    Request,
    Retry,
    RunRecord,
    State,
    Status,
)
from fdcore.testing.memory_fleet import MemoryFleet

FIXTURES = Path(__file__).parent / "fixtures" / "contract1"
DOCS = Path(__file__).parents[1] / "docs" / "contracts.md"
KINDS = {
    "request": Request,
    "request-older": Request,
    "status": Status,
    "status-older": Status,
    "agent": AgentRecord,
    "agent-older": AgentRecord,
    "lease": Lease,
    "run": RunRecord,
    "cancel": Cancel,
    "retry": Retry,
    "incidents": IncidentDocument,
    "incidents-older": IncidentDocument,
    "archive-entry": ArchiveEntry,
    "audit": AuditEvent,
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_fixture_is_documented_verbatim(name: str) -> None:
    assert (FIXTURES / f"{name}.json").read_text().rstrip() in DOCS.read_text()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_fixture_round_trips_with_unknown_fields_kept(name: str) -> None:
    raw = json.loads((FIXTURES / f"{name}.json").read_text())
    raw["x_from_a_newer_agent"] = {"nested": [1, 2]}
    model = decode(KINDS[name], json.dumps(raw).encode(), f"{name}.json")
    again = json.loads(encode(model))
    assert again["x_from_a_newer_agent"] == {"nested": [1, 2]}
    assert decode(KINDS[name], encode(model), f"{name}.json") == model


def test_nested_unknown_fields_survive() -> None:
    raw = json.loads((FIXTURES / "status.json").read_text())
    raw["attempts"][0]["x_note"] = "kept"
    status = decode(Status, json.dumps(raw).encode(), "status.json")
    assert json.loads(encode(status))["attempts"][0]["x_note"] == "kept"


def test_older_files_get_defaults() -> None:
    request = decode(Request, (FIXTURES / "request-older.json").read_bytes(), "r")
    assert (request.deadline, request.schedule, request.max_attempts) == (None, None, None)
    status = decode(Status, (FIXTURES / "status-older.json").read_bytes(), "s")
    assert (status.attempt, status.attempts, status.tables_done) == (1, [], [])
    record = decode(AgentRecord, (FIXTURES / "agent-older.json").read_bytes(), "a")
    assert (record.concurrency, record.running, record.schedules) == (1, 0, [])
    assert "deadline" not in json.loads(encode(request))  # None is left out, not null


def test_older_agent_files_are_processed_as_before(fdcore_memory_fleet: MemoryFleet) -> None:
    """An older request waits to be claimed; an older status of a lost agent is taken over."""
    older_request = (FIXTURES / "request-older.json").read_bytes()
    fdcore_memory_fleet.storage.create("requests/r-2026-0001.json", older_request)
    second = json.loads(older_request)
    second["id"] = "r-2026-0002"
    fdcore_memory_fleet.storage.create("requests/r-2026-0002.json", json.dumps(second).encode())
    status = json.loads((FIXTURES / "status-older.json").read_bytes())
    status["request"] = "r-2026-0002"
    fdcore_memory_fleet.storage.create("status/r-2026-0002.json", json.dumps(status).encode())
    fdcore_memory_fleet.storage.create(
        "agents/etl-01.json", (FIXTURES / "agent-older.json").read_bytes()
    )

    agent = fdcore_memory_fleet.agent("etl-02", take_over=True, grace_seconds=1)
    for _ in range(4):
        agent.poll()
        fdcore_memory_fleet.finish_runs()
    first = fdcore_memory_fleet.mailbox.status("r-2026-0001")
    assert first is not None and first.value.state is State.SUCCEEDED
    moved = fdcore_memory_fleet.mailbox.status("r-2026-0002")
    assert moved is not None and moved.value.state is State.SUCCEEDED
    assert [(a.agent, a.outcome) for a in moved.value.attempts] == [
        ("etl-01", Outcome.LOST),
        ("etl-02", Outcome.SUCCEEDED),
    ]
