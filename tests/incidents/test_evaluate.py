"""Evaluation: agent_offline, request_failed, slot_missed; resolution scoped to what was read."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.layout import agent_key, request_key, status_key
from fdcore.contract.models import (
    AgentRecord,
    Attempt,
    IncidentState,
    Outcome,
    Request,
    ScheduleRef,
    State,
    Status,
)
from fdcore.errors import StorageUnavailable
from fdcore.incidents.book import IncidentBook
from fdcore.incidents.evaluate import evaluate
from fdcore.mailbox.access import Mailbox

NOW = datetime(2026, 9, 1, 3, 0, tzinfo=timezone.utc)
GRACE = 60.0


def environment() -> IncidentBook:
    return IncidentBook(Mailbox(MemoryStorage.fresh("evaluate")), pause=lambda _s: None)


def put_agent(book: IncidentBook, name: str, seen_ago: float, **fields: object) -> None:
    record = AgentRecord(name, NOW - timedelta(seconds=seen_ago), 60.0, **fields)  # type: ignore[arg-type]
    storage = book.mailbox.storage
    found = storage.read(agent_key(name))
    if found is None:
        book.mailbox.create(agent_key(name), record)
    else:
        book.mailbox.replace(agent_key(name), record, found.etag)


def put_status(book: IncidentBook, request: str, state: State, **fields: object) -> None:
    book.mailbox.create(status_key(request), Status(request, state, NOW, **fields))  # type: ignore[arg-type]


def keys(book: IncidentBook) -> list[str]:
    return sorted(i.key for i in book.read().open)


def test_an_agent_past_stale_after_and_grace_is_offline_until_it_comes_back() -> None:
    book = environment()
    put_agent(book, "etl-01", seen_ago=10)
    put_agent(book, "etl-02", seen_ago=200)
    put_agent(book, "etl-03", seen_ago=200, stopped_at=NOW - timedelta(seconds=200))
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert [i.key for i in outcome.opened] == ["agent_offline:etl-02"]  # etl-03 stopped cleanly
    evaluate(book, NOW + timedelta(seconds=5), GRACE, "etl-01")
    assert book.read().open[0].count == 1  # seen again, the same lost spell: not a second one
    assert book.read().open[0].last_seen == NOW + timedelta(seconds=5)
    put_agent(book, "etl-02", seen_ago=0)
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert [i.key for i in outcome.resolved] == ["agent_offline:etl-02"]
    assert book.read().resolved[0].state is IncidentState.RESOLVED


def test_an_incident_counts_occurrences_not_the_evaluations_that_saw_one() -> None:
    """Seen before: 736 after 12 minutes for one failed request, 14 after 14 evaluations of one
    lost agent, while the Teams card said "Seen: 1 times"."""
    book = environment()
    put_status(book, "r-1", State.FAILED, message="exit code 2")
    put_agent(book, "etl-02", seen_ago=200)
    ref = ScheduleRef("hourly", "496752")
    book.mailbox.create(request_key("s-1"), Request("s-1", ["sales"], NOW, schedule=ref))
    put_status(book, "s-1", State.EXPIRED)
    for minute in range(14):
        evaluate(book, NOW + timedelta(minutes=minute), GRACE, "etl-01")
    counts = {i.key: i.count for i in book.read().open}
    assert counts == {
        "request_failed:r-1": 1,  # one failure
        "agent_offline:etl-02": 1,  # one lost spell
        "slot_missed:hourly.496752": 1,  # one slot missed
    }
    # etl-02 came back and was lost again between two evaluations: a second lost spell.
    put_agent(book, "etl-02", seen_ago=-600)  # its record written 10 minutes after NOW...
    later = NOW + timedelta(minutes=30)  # ...and silent since: lost again
    evaluate(book, later, GRACE, "etl-01")
    evaluate(book, later + timedelta(minutes=1), GRACE, "etl-01")
    [offline] = [i for i in book.read().open if i.kind == "agent_offline"]
    assert (offline.count, offline.began_at) == (2, NOW + timedelta(seconds=600 + 60))


def test_an_unreadable_agent_record_never_resolves_agent_offline() -> None:
    book = environment()
    put_agent(book, "etl-02", seen_ago=200)
    evaluate(book, NOW, GRACE, "etl-01")
    found = book.mailbox.storage.read(agent_key("etl-02"))
    assert found is not None
    book.mailbox.storage.replace(agent_key("etl-02"), b"{not json", found.etag)
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert outcome.resolved == []
    assert keys(book) == ["agent_offline:etl-02"]
    assert any("agents/etl-02.json" in problem for problem in outcome.problems)


def test_a_failed_request_opens_request_failed_with_its_message() -> None:
    book = environment()
    attempt = Attempt(3, "etl-01", NOW, NOW, Outcome.FAILED, "exit code 2: bad row")
    put_status(book, "r-1", State.FAILED, attempts=[attempt])
    put_status(book, "r-2", State.SUCCEEDED)
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert [(i.key, i.message) for i in outcome.opened] == [
        ("request_failed:r-1", "exit code 2: bad row")
    ]


def test_a_shared_slot_that_expired_unrun_is_missed() -> None:
    book = environment()
    ref = ScheduleRef("hourly", "496752")
    book.mailbox.create(request_key("s-1"), Request("s-1", ["sales"], NOW, schedule=ref))
    put_status(book, "s-1", State.EXPIRED)
    # an unshared schedule's request (affinity) and an ad-hoc one: not slots missed
    book.mailbox.create(
        request_key("s-2"), Request("s-2", ["sales"], NOW, schedule=ref, affinity="etl-01")
    )
    put_status(book, "s-2", State.EXPIRED)
    book.mailbox.create(request_key("r-3"), Request("r-3", ["sales"], NOW))
    put_status(book, "r-3", State.EXPIRED)
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert [i.key for i in outcome.opened] == ["slot_missed:hourly.496752"]


def test_a_kind_whose_listing_failed_resolves_nothing() -> None:
    book = environment()
    put_agent(book, "etl-02", seen_ago=200)
    put_status(book, "r-1", State.FAILED)
    evaluate(book, NOW, GRACE, "etl-01")
    storage = book.mailbox.storage
    # the index lists with versions, or only what changed, where the store can
    for listing in ("list", "list_versions", "list_changes"):
        real = getattr(storage, listing)

        def statuses_unreachable(prefix: str = "", *args: Any, real: Any = real) -> Any:
            if prefix.startswith("status/"):
                raise StorageUnavailable(prefix, "unreachable")
            return real(prefix, *args)

        setattr(storage, listing, statuses_unreachable)
    put_agent(book, "etl-02", seen_ago=0)
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert [i.key for i in outcome.resolved] == ["agent_offline:etl-02"]
    assert keys(book) == ["request_failed:r-1"]  # statuses unread: left open
    assert any("request_failed not evaluated" in p for p in outcome.problems)


def test_a_failure_resolved_by_a_person_is_not_reopened() -> None:
    from fdcore.incidents.book import resolve

    book = environment()
    put_status(book, "r-1", State.FAILED)
    evaluate(book, NOW, GRACE, "etl-01")
    book.change(lambda d: resolve(d, "request_failed:r-1", NOW + timedelta(seconds=1), "ann"))
    outcome = evaluate(book, NOW + timedelta(minutes=1), GRACE, "etl-01")
    assert outcome.opened == [] and keys(book) == []


def test_schedule_conflicts_open_and_clear_with_the_agents_records() -> None:
    from fdcore.contract.models import ScheduleInfo

    book = environment()
    hourly = ScheduleInfo("hourly", shared=False, when="every 3600s", fingerprint="a")
    put_agent(book, "etl-01", seen_ago=1, schedules=[hourly])
    put_agent(book, "etl-02", seen_ago=1, schedules=[hourly])
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    (incident,) = outcome.opened
    assert (incident.key, incident.severity) == ("schedule_conflict:hourly", "warning")
    assert incident.message is not None and "is held by etl-01, etl-02" in incident.message
    put_agent(book, "etl-02", seen_ago=1, stopped_at=NOW)  # a stopped agent's copy does not count
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert [i.key for i in outcome.resolved] == ["schedule_conflict:hourly"]


def test_an_unreadable_record_leaves_schedule_conflicts_open() -> None:
    from fdcore.contract.models import ScheduleInfo

    book = environment()
    one = ScheduleInfo("hourly", shared=True, when="every 3600s", fingerprint="a")
    other = ScheduleInfo("hourly", shared=True, when="every 60s", fingerprint="b")
    put_agent(book, "etl-01", seen_ago=1, schedules=[one])
    put_agent(book, "etl-02", seen_ago=1, schedules=[other])
    assert [i.key for i in evaluate(book, NOW, GRACE, "etl-01").opened] == [
        "schedule_conflict:hourly"
    ]
    found = book.mailbox.storage.read(agent_key("etl-02"))
    assert found is not None
    book.mailbox.storage.replace(agent_key("etl-02"), b"[]", found.etag)
    assert evaluate(book, NOW, GRACE, "etl-01").resolved == []
    assert keys(book) == ["schedule_conflict:hourly"]


def test_old_failures_open_nothing_but_an_open_one_is_kept() -> None:
    book = environment()
    put_status(book, "r-1", State.FAILED)  # failed at NOW
    evaluate(book, NOW, GRACE, "etl-01")
    later = NOW + timedelta(days=2)  # r-1 is now older than the lookback of 1d
    book.mailbox.create(status_key("r-2"), Status("r-2", State.FAILED, NOW))
    outcome = evaluate(book, later, GRACE, "etl-01", lookback=86400)
    assert outcome.opened == [] and outcome.resolved == []  # r-2 too old to open; r-1 kept
    assert [i.key for i in outcome.bumped] == ["request_failed:r-1"]


def test_the_open_list_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    book = environment()
    for n in range(5):
        put_status(book, f"r-{n}", State.FAILED)
    monkeypatch.setattr("fdcore.incidents.evaluate.MAX_OPEN", 3)
    outcome = evaluate(book, NOW, GRACE, "etl-01")
    assert len(outcome.opened) == 3 and len(book.read().open) == 3
    assert "2 incidents not opened: 3 are open already" in outcome.problems


def test_a_schedule_copy_without_entities_reads_as_unknown_tables() -> None:
    from fdcore.contract.models import ScheduleInfo

    book = environment()
    one = ScheduleInfo("hourly", shared=True, when="every 3600s", entities=[], fingerprint="a")
    older = ScheduleInfo("hourly", shared=True, when="every 3600s", fingerprint="b")
    put_agent(book, "etl-01", seen_ago=1, schedules=[one])
    put_agent(book, "etl-02", seen_ago=1, schedules=[older])
    (incident,) = evaluate(book, NOW, GRACE, "etl-01").opened
    assert incident.message is not None
    assert "etl-01: shared, every 3600s, tables all" in incident.message
    assert "etl-02: shared, every 3600s, tables unknown" in incident.message


def test_an_offline_agents_incident_names_its_owner() -> None:
    book = environment()
    put_agent(book, "etl-01", seen_ago=200, owner="data team (ann)")
    put_agent(book, "etl-02", seen_ago=200)  # an older record: no owner, said nowhere
    opened = {i.key: i.message or "" for i in evaluate(book, NOW, GRACE, "etl-03").opened}
    assert opened["agent_offline:etl-01"].endswith("; owner: data team (ann)")
    assert "owner" not in opened["agent_offline:etl-02"]
