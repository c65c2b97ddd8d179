"""Delivery across agents through a real Teams webhook on 127.0.0.1: once per route and incident,
escalation only while unacknowledged, quiet hours deferring, digests bundling."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, time, timezone

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.clock import ManualClock
from fdcore.contract.layout import status_key
from fdcore.contract.models import State, Status
from fdcore.incidents.book import IncidentBook, acknowledge
from fdcore.incidents.watch import IncidentWatch
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins
from fdcore.plugins.routes import open_routes
from fdcore.settings.agent_toml import AgentConfig, IncidentsConfig, QuietHours, RouteConfig
from fdcore.testing.webhook import RecordingWebhook, recording_webhook

NOW = datetime(2026, 9, 1, 12, 0, tzinfo=timezone.utc)
VARIABLE = "FDCORE_TEST_TEAMS_WEBHOOK"


@pytest.fixture
def webhook(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingWebhook]:
    with recording_webhook() as server:
        monkeypatch.setenv(VARIABLE, server.url())
        yield server


def route(**policy: object) -> RouteConfig:
    return RouteConfig("oncall", "teams", {"webhook_env": VARIABLE}, **policy)  # type: ignore[arg-type]


def agents(
    storage: MemoryStorage, clock: ManualClock, policy: RouteConfig, n: int = 3
) -> list[IncidentWatch]:
    plugins = load_plugins()
    watches = []
    for i in range(n):
        config = AgentConfig(
            name=f"etl-0{i}",
            environment=storage.url,
            routes=(policy,),
            incidents=IncidentsConfig(enabled=True),
        )
        watches.append(IncidentWatch(config, storage, open_routes(config, plugins), clock))
    return watches


def fail(storage: MemoryStorage, request: str) -> None:
    Mailbox(storage).create(status_key(request), Status(request, State.FAILED, NOW, message="boom"))


def test_three_agents_escalating_one_incident_deliver_exactly_one_post(
    webhook: RecordingWebhook,
) -> None:
    storage, clock = MemoryStorage.fresh("delivery"), ManualClock(NOW)
    fleet = agents(storage, clock, route(escalate_after=600.0))
    fail(storage, "r-1")
    for watch in fleet:
        watch.tick()
    assert webhook.posts == []  # not yet: escalate_after has not passed
    clock.advance(601)
    for _ in range(3):  # the three at the same moment, each on its own thread
        start = threading.Barrier(len(fleet))
        threads = [
            threading.Thread(target=lambda w=watch, b=start: (b.wait(), w.tick()))
            for watch in fleet
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert len(webhook.delivered) == 1
    card = webhook.delivered[0].json()["attachments"][0]["content"]
    assert "escalated" in card["body"][0]["text"]
    incident = IncidentBook(Mailbox(storage)).read().open[0]
    assert incident.notified == ["oncall"]
    assert [(d.route, d.escalation, d.error) for d in incident.deliveries] == [
        ("oncall", True, None)
    ]


def test_an_acknowledged_incident_is_never_escalated(webhook: RecordingWebhook) -> None:
    storage, clock = MemoryStorage.fresh("delivery"), ManualClock(NOW)
    fleet = agents(storage, clock, route(escalate_after=600.0))
    fail(storage, "r-1")
    fleet[0].tick()
    book = IncidentBook(Mailbox(storage))
    book.change(lambda d: acknowledge(d, "inc-0001", clock.now(), "ann"))
    clock.advance(3600)
    for watch in fleet:
        watch.tick()
    assert webhook.posts == []


def test_a_route_without_escalation_posts_when_the_incident_opens(
    webhook: RecordingWebhook,
) -> None:
    storage, clock = MemoryStorage.fresh("delivery"), ManualClock(NOW)
    fleet = agents(storage, clock, route())
    fail(storage, "r-1")
    for watch in fleet:
        watch.tick()
    clock.advance(60)
    fleet[0].tick()
    assert len(webhook.delivered) == 1


def test_quiet_hours_defer_to_their_end(webhook: RecordingWebhook) -> None:
    storage = MemoryStorage.fresh("delivery")
    clock = ManualClock(datetime(2026, 9, 1, 23, 0, tzinfo=timezone.utc))  # 01:00 in Berlin
    quiet = QuietHours(time(22, 0), time(7, 0), "Europe/Berlin")
    fleet = agents(storage, clock, route(quiet_hours=quiet), n=1)
    fail(storage, "r-1")
    fleet[0].tick()
    clock.advance(4 * 3600)  # 05:00 Berlin: still quiet
    fleet[0].tick()
    assert webhook.posts == []
    clock.advance(2 * 3600)  # 07:00 Berlin: quiet hours over
    fleet[0].tick()
    assert len(webhook.delivered) == 1


def test_a_digest_bundles_what_falls_due_within_its_interval(webhook: RecordingWebhook) -> None:
    storage, clock = MemoryStorage.fresh("delivery"), ManualClock(NOW)
    fleet = agents(storage, clock, route(digest=900.0), n=2)
    fail(storage, "r-1")
    fleet[0].tick()
    clock.advance(300)
    fail(storage, "r-2")
    fail(storage, "r-3")
    fleet[1].tick()
    assert webhook.posts == []  # the first is due 15 minutes after it fell due
    clock.advance(600)
    fleet[0].tick()
    fleet[1].tick()
    assert len(webhook.delivered) == 1
    card = webhook.delivered[0].json()["attachments"][0]["content"]
    containers = [e for e in card["body"] if e["type"] == "Container"]
    assert len(containers) == 3
    assert card["body"][1]["text"] == "3 fdcore incidents in memory://delivery"


def test_a_failed_post_is_recorded_on_its_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    from fdcore.testing.webhook import Answer

    with recording_webhook([Answer(404)]) as server:
        monkeypatch.setenv(VARIABLE, server.url())
        storage, clock = MemoryStorage.fresh("delivery"), ManualClock(NOW)
        fleet = agents(storage, clock, route(), n=1)
        fail(storage, "r-1")
        fleet[0].tick()
        assert len(server.posts) == 1
    incident = IncidentBook(Mailbox(storage)).read().open[0]
    error = incident.deliveries[0].error
    assert error is not None and "HTTP 404" in error
    assert "$FDCORE_TEST_TEAMS_WEBHOOK" in error
