"""fdcore-teams against a real webhook on 127.0.0.1 (fdcore.testing.webhook)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest
from fdcore_teams import TeamsNotifier

from fdcore.abc import Notification
from fdcore.testing.webhook import Answer, recording_webhook
from fdcore.webhook import WebhookRefused, WebhookUnavailable, retry_after

VARIABLE = "FDCORE_TEST_TEAMS_WEBHOOK"
SEEN = datetime(2026, 9, 1, 3, 0, tzinfo=timezone.utc)

#: The required properties of the Adaptive Card 1.4 schema's elements this notifier uses
#: (adaptive-card.json, version 1.4: "required" of AdaptiveCard, TextBlock, FactSet, Fact,
#: Container).
REQUIRED = {
    "AdaptiveCard": ("type", "version"),
    "TextBlock": ("type", "text"),
    "FactSet": ("type", "facts"),
    "Container": ("type", "items"),
}


def check_card_element(element: dict[str, Any]) -> None:
    kind = element.get("type")
    assert kind in REQUIRED, f"element type {kind!r} is not one this test knows"
    for name in REQUIRED[kind]:
        assert name in element, f"{kind} lacks required {name!r}"
    if kind == "TextBlock":
        assert isinstance(element["text"], str) and element["text"]
    if kind == "FactSet":
        for fact in element["facts"]:
            assert isinstance(fact["title"], str) and isinstance(fact["value"], str)
    for child in element.get("body", []) + element.get("items", []):
        check_card_element(child)


def check_envelope(message: dict[str, Any]) -> dict[str, Any]:
    assert message["type"] == "message"
    (attachment,) = message["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card: dict[str, Any] = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    check_card_element(card)
    return card


def notification(incident: str = "inc-0001", **fields: Any) -> Notification:
    return Notification(
        environment="file:///data/prod",
        incident_id=incident,
        title="Request r-1 failed",
        severity="error",
        text="exit code 2: bad row",
        route="oncall",
        kind="request_failed",
        subject="r-1",
        first_seen=SEEN,
        last_seen=SEEN,
        count=3,
        ack_command=f"fdcore incidents ack {incident} --env file:///data/prod",
        **fields,
    )


def channel(monkeypatch: pytest.MonkeyPatch, url: str, **options: str) -> Any:
    monkeypatch.setenv(VARIABLE, url)
    return TeamsNotifier().open("oncall", {"webhook_env": VARIABLE, **options})


def texts(card: dict[str, Any]) -> str:
    return repr(card)


def test_a_post_is_a_well_formed_adaptive_card_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_webhook() as server:
        channel(monkeypatch, server.url()).send(notification())
    (post,) = server.posts
    assert post.headers["Content-Type"] == "application/json"
    card = check_envelope(post.json())
    text = texts(card)
    for expected in (
        "Request r-1 failed",
        "request_failed",
        "r-1",
        "2026-09-01 03:00:00 UTC",
        "'Occurrences', 'value': '3'",
        "fdcore incidents ack inc-0001 --env file:///data/prod",
    ):
        assert expected in text


def test_a_digest_is_one_card_listing_each_incident(monkeypatch: pytest.MonkeyPatch) -> None:
    items = (notification("inc-0001"), notification("inc-0002"))
    digest = Notification(
        "prod", "inc-0001,inc-0002", "2 incidents", "error", "", "oncall", digest=items
    )
    with recording_webhook() as server:
        channel(monkeypatch, server.url()).send(digest)
    card = check_envelope(server.posts[0].json())
    assert "fdcore incidents ack inc-0002" in texts(card)
    assert len([e for e in card["body"] if e["type"] == "Container"]) == 2


def test_429_with_retry_after_then_200_delivers_exactly_one_post_after_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with recording_webhook([Answer(429, {"Retry-After": "1"})]) as server:
        started = time.monotonic()
        channel(monkeypatch, server.url()).send(notification())
    assert [post.status for post in server.posts] == [429, 200]
    assert len(server.delivered) == 1
    assert server.delivered[0].at - started >= 1.0


def test_5xx_is_retried_within_the_bounded_total(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [Answer(503, {"Retry-After": "1"}) for _ in range(10)]
    with recording_webhook(answers) as server:
        send = channel(monkeypatch, server.url(), retry_for="2s")
        started = time.monotonic()
        with pytest.raises(WebhookUnavailable, match="still failing after 2 attempts"):
            send.send(notification())
    assert time.monotonic() - started < 4
    assert len(server.posts) == 2  # the third would wait past the bound


def test_a_4xx_is_a_configuration_error_reported_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_webhook([Answer(404)]) as server:
        send = channel(monkeypatch, server.url())
        with pytest.raises(WebhookRefused, match=r"HTTP 404 .*check the URL"):
            send.send(notification())
        with pytest.raises(WebhookRefused, match="not posted again"):
            send.send(notification("inc-0002"))
    assert len(server.posts) == 1  # not retried, not posted again


def test_a_hanging_webhook_is_given_up_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_webhook([Answer(200, delay=30)] * 5) as server:
        send = channel(monkeypatch, server.url(), timeout="1s", retry_for="2s")
        started = time.monotonic()
        with pytest.raises(WebhookUnavailable):
            send.send(notification())
        assert time.monotonic() - started < 4


@pytest.mark.parametrize(
    ("options", "environ", "message"),
    [
        ({}, None, "webhook_env: expected the name of the variable"),
        ({"webhook_env": VARIABLE}, None, f"environment variable {VARIABLE} is not set"),
        ({"webhook_env": VARIABLE}, "ftp://x/secret", f"{VARIABLE} does not hold an http(s) URL"),
        ({"webhook_env": VARIABLE, "url": "x"}, "https://x", "url: unknown option"),
        ({"webhook_env": VARIABLE, "timeout": "10"}, "https://x", "timeout: "),
    ],
)
def test_bad_options_are_one_line_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, str], environ: str | None, message: str
) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    if environ is not None:
        monkeypatch.setenv(VARIABLE, environ)
    with pytest.raises(ValueError) as info:
        TeamsNotifier().open("oncall", options)
    assert message in str(info.value)
    assert "secret" not in str(info.value) and "\n" not in str(info.value)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("1", 0.0) == 1.0
    assert retry_after(None, 0.0) is None
    assert retry_after("Wed, 21 Oct 2015 07:28:10 GMT", 1445412480.0) == 10.0
    assert retry_after("soon", 0.0) is None
