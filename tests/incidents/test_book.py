"""The incident document: dedup by key, If-Match retries, the resolved bound, unknown fields."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import attrs
import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.layout import INCIDENTS
from fdcore.contract.models import Incident, IncidentDocument, IncidentState
from fdcore.errors import ConfigError, PreconditionFailed
from fdcore.incidents.book import (
    Finding,
    IncidentBook,
    IncidentConflict,
    acknowledge,
    add_note,
    report,
    resolve,
    resolve_cleared,
)

NOW = datetime(2026, 9, 1, 3, 0, tzinfo=timezone.utc)


def book() -> IncidentBook:
    from fdcore.mailbox.access import Mailbox

    return IncidentBook(Mailbox(MemoryStorage.fresh("incidents")), pause=lambda _s: None)


def failed(request: str = "r-1") -> Finding:
    return Finding("request_failed", request, f"Request {request} failed", "boom")


def test_opening_an_open_key_bumps_it_instead_of_opening_a_second() -> None:
    incidents = book()
    first = incidents.change(lambda d: report(d, failed(), NOW, "etl-01"))
    later = NOW + timedelta(minutes=1)
    again = incidents.change(lambda d: report(d, failed(), later, "etl-02"))
    document = incidents.read()
    assert first is not None and again is not None
    assert [i.id for i in document.open] == ["inc-0001"]
    assert document.open[0].count == 1  # seen again, no new occurrence: no start time
    assert document.open[0].last_seen == later
    assert document.open[0].opened_at == NOW
    assert document.open[0].key == "request_failed:r-1"


def test_an_older_documents_incident_keeps_its_count_and_counts_on_from_its_next_occurrence() -> (
    None
):
    incidents = book()
    began = NOW - timedelta(hours=1)
    old = Incident("inc-0001", "request_failed:r-1", "Request r-1 failed", NOW, "etl-01", count=5)
    incidents.mailbox.create(INCIDENTS, IncidentDocument(open=[old], last_number=1))
    seen = attrs.evolve(failed(), since=began)
    incidents.change(lambda d: report(d, seen, NOW, "etl-01"))
    [incident] = incidents.read().open
    assert (incident.count, incident.began_at) == (5, began)  # no start known: the same one
    incidents.change(lambda d: report(d, attrs.evolve(seen, since=began - timedelta(1)), NOW, "x"))
    assert incidents.read().open[0].count == 5  # an earlier start (a racer's older read)
    incidents.change(lambda d: report(d, attrs.evolve(seen, since=NOW), NOW, "etl-01"))
    assert incidents.read().open[0].count == 6  # began again since: one more occurrence


def test_a_lost_if_match_is_retried_from_a_fresh_read() -> None:
    incidents = book()
    incidents.change(lambda d: report(d, failed("r-1"), NOW, "etl-01"))
    storage = incidents.mailbox.storage
    real_replace = storage.replace
    raced = []

    def replace_after_a_rival(key: str, data: bytes, etag: str) -> str:
        if not raced:  # a rival opens r-2 between our read and our write
            raced.append(True)
            rival = IncidentBook(incidents.mailbox)
            rival.change(lambda d: report(d, failed("r-2"), NOW, "etl-02"))
        return real_replace(key, data, etag)

    storage.replace = replace_after_a_rival  # type: ignore[method-assign]
    incidents.change(lambda d: report(d, failed("r-3"), NOW, "etl-01"))
    keys = sorted(i.key for i in incidents.read().open)
    assert keys == ["request_failed:r-1", "request_failed:r-2", "request_failed:r-3"]
    assert sorted(i.id for i in incidents.read().open) == ["inc-0001", "inc-0002", "inc-0003"]


def test_retries_are_bounded() -> None:
    incidents = book()
    incidents.attempts = 3
    incidents.change(lambda d: report(d, failed("r-1"), NOW, "etl-01"))

    def always_lose(key: str, data: bytes, etag: str) -> str:
        raise PreconditionFailed(key, "etag changed")

    incidents.mailbox.storage.replace = always_lose  # type: ignore[method-assign]
    with pytest.raises(IncidentConflict, match="3 attempts"):
        incidents.change(lambda d: report(d, failed("r-2"), NOW, "etl-01"))


def test_an_unchanged_document_is_not_rewritten() -> None:
    incidents = book()
    incidents.change(lambda d: report(d, failed(), NOW, "etl-01"))
    etag = incidents.mailbox.storage.read(INCIDENTS).etag  # type: ignore[union-attr]
    incidents.change(lambda d: None)
    assert incidents.mailbox.storage.read(INCIDENTS).etag == etag  # type: ignore[union-attr]


def test_the_resolved_list_never_exceeds_200() -> None:
    incidents = book()
    for n in range(230):
        finding = failed(f"r-{n}")
        incidents.change(lambda d, f=finding: report(d, f, NOW, "etl-01"))
        incidents.change(lambda d, f=finding: resolve(d, f.key, NOW, "etl-01"))
    document = incidents.read()
    assert len(document.resolved) == IncidentDocument.RESOLVED_KEPT == 200
    assert document.resolved[-1].key == "request_failed:r-229"  # the newest kept
    assert document.resolved[0].key == "request_failed:r-30"
    assert document.open == []
    assert document.last_number == 230  # ids are never handed out twice


def test_unknown_fields_of_a_newer_version_are_kept() -> None:
    incidents = book()
    newer = {
        "contract": 1,
        "future_top": {"x": 1},
        "open": [
            {
                "id": "inc-0009",
                "key": "request_failed:r-1",
                "title": "Request r-1 failed",
                "opened_at": "2026-09-01T00:00:00Z",
                "opened_by": "etl-09",
                "owner_team": "data",
                "notes": [{"at": "2026-09-01T00:00:00Z", "by": "ann", "text": "t", "link": "u"}],
            }
        ],
        "resolved": [],
    }
    incidents.mailbox.storage.create(INCIDENTS, json.dumps(newer).encode())
    incidents.change(lambda d: report(d, failed("r-2"), NOW, "etl-01"))
    incidents.change(lambda d: acknowledge(d, "inc-0009", NOW, "bob"))
    written = json.loads(incidents.mailbox.storage.read(INCIDENTS).data)  # type: ignore[union-attr]
    assert written["future_top"] == {"x": 1}
    assert written["open"][0]["owner_team"] == "data"
    assert written["open"][0]["notes"][0]["link"] == "u"
    assert written["open"][0]["state"] == "acknowledged"
    assert written["open"][1]["id"] == "inc-0010"  # numbered after the newer version's ids


def test_the_first_version_of_the_document_reads() -> None:
    incidents = book()
    oldest = {
        "open": [
            {
                "id": "inc-0007",
                "key": "request-failed:r-2026-0042",
                "title": "Request r-2026-0042 failed",
                "opened_at": "2026-09-01T03:00:00.000Z",
                "opened_by": "etl-01",
                "notified": ["data-oncall"],
            }
        ],
        "resolved": [],
    }
    incidents.mailbox.storage.create(INCIDENTS, json.dumps(oldest).encode())
    incident = incidents.read().open[0]
    assert incident.state is IncidentState.OPEN and incident.count == 1
    assert incident.kind is None  # a first-version incident has no kind: never auto-resolved


def test_ack_resolve_and_note_record_who_and_when() -> None:
    incidents = book()
    incidents.change(lambda d: report(d, failed(), NOW, "etl-01"))
    incidents.change(lambda d: acknowledge(d, "inc-0001", NOW, "ann"))
    incidents.change(lambda d: add_note(d, "request_failed:r-1", "rerun tonight", NOW, "ann"))
    incident = incidents.change(lambda d: resolve(d, "inc-0001", NOW, "bob"))
    assert incident.state is IncidentState.RESOLVED
    assert (incident.acknowledged_by, incident.resolved_by) == ("ann", "bob")
    assert [n.text for n in incident.notes] == ["rerun tonight"]
    with pytest.raises(ConfigError, match="no incident 'inc-0404'"):
        incidents.change(lambda d: acknowledge(d, "inc-0404", NOW, "ann"))


def test_resolution_is_scoped_to_kinds_read_and_known_subjects() -> None:
    document = IncidentDocument()
    offline = Finding("agent_offline", "etl-02", "Agent etl-02 is offline")
    unreadable = Finding("agent_offline", "etl-03", "Agent etl-03 is offline")
    for finding in (failed(), offline, unreadable):
        report(document, finding, NOW, "etl-01")
    # agent_offline read, etl-03's record unreadable: only etl-02's incident clears
    cleared = resolve_cleared(
        document, {"agent_offline"}, set(), {"agent_offline:etl-03"}, NOW, "etl-01"
    )
    assert [i.key for i in cleared] == ["agent_offline:etl-02"]
    assert sorted(i.key for i in document.open) == ["agent_offline:etl-03", "request_failed:r-1"]


def test_a_condition_resolved_after_it_began_is_not_reopened() -> None:
    document = IncidentDocument()
    since = NOW - timedelta(hours=1)
    finding = Finding("request_failed", "r-1", "Request r-1 failed", since=since)
    report(document, finding, NOW, "etl-01")
    resolve(document, "inc-0001", NOW, "ann")
    assert report(document, finding, NOW + timedelta(minutes=5), "etl-01") is None
    again = Finding("request_failed", "r-1", "t", since=NOW + timedelta(minutes=1))
    reopened = report(document, again, NOW + timedelta(minutes=5), "etl-01")
    assert reopened is not None and reopened.id == "inc-0002"
