"""fdcore-webhook against a real webhook on 127.0.0.1, registered as a plugin by the test (it is
not installed): the notifier hook is open to any distribution."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timezone

import fdcore_webhook
import pytest
from fdcore_webhook import SIGNATURE, TIMESTAMP

from fdcore.abc import Notification
from fdcore.cli.config import parse_config
from fdcore.plugins.manager import NOTIFIER, load_plugins
from fdcore.plugins.routes import NotificationRoutes, open_routes
from fdcore.testing.webhook import Answer, recording_webhook

URL_VARIABLE = "FDCORE_TEST_WEBHOOK_URL"
SECRET_VARIABLE = "FDCORE_TEST_WEBHOOK_SECRET"
SECRET = "k3y-for-tests"


def notification() -> Notification:
    seen = datetime(2026, 9, 1, 3, 0, tzinfo=timezone.utc)
    return Notification(
        "prod", "inc-0001", "Request r-1 failed", "error", "boom", "ops",
        kind="request_failed", subject="r-1", first_seen=seen, last_seen=seen,
    )  # fmt: skip


def routes(monkeypatch: pytest.MonkeyPatch, url: str) -> NotificationRoutes:
    monkeypatch.setenv(URL_VARIABLE, url)
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    plugins = load_plugins(extra=[("webhook", fdcore_webhook)])
    assert plugins.get(NOTIFIER, "webhook").name == "webhook"
    config = parse_config(
        {
            "agent": {"name": "etl-01", "environment": "memory://x"},
            "notify": {
                "routes": {
                    "ops": {
                        "notifier": "webhook",
                        "webhook_env": URL_VARIABLE,
                        "secret_env": SECRET_VARIABLE,
                        "retry_for": "3s",
                    }
                }
            },
        }
    )
    return open_routes(config, plugins)


def test_a_post_is_json_signed_with_hmac(monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_webhook() as server:
        delivery = routes(monkeypatch, server.url()).send(notification())
    assert delivery.delivered
    (post,) = server.posts
    payload = post.json()
    assert (payload["incident_id"], payload["subject"]) == ("inc-0001", "r-1")
    assert payload["first_seen"] == "2026-09-01T03:00:00+00:00"
    timestamp = post.headers[TIMESTAMP]
    expected = hmac.new(SECRET.encode(), timestamp.encode() + b"." + post.body, hashlib.sha256)
    assert post.headers[SIGNATURE] == f"sha256={expected.hexdigest()}"
    assert hmac.compare_digest(post.headers[SIGNATURE], f"sha256={expected.hexdigest()}")


def test_429_is_retried_and_neither_secret_appears_in_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with recording_webhook([Answer(429, {"Retry-After": "1"})] + [Answer(500)] * 5) as server:
        url = server.url(query="sig=hidden-in-url")
        delivery = routes(monkeypatch, url).send(notification())
    assert not delivery.delivered and len(server.posts) >= 2
    assert delivery.error is not None and "$FDCORE_TEST_WEBHOOK_URL" in delivery.error
    for secret in (url, "hidden-in-url", SECRET):
        assert secret not in delivery.error
        assert secret not in json.dumps([p.json() for p in server.posts])


def test_a_missing_secret_is_a_one_line_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(URL_VARIABLE, "https://example.invalid/hook")
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)
    with pytest.raises(ValueError, match=f"secret_env: environment variable {SECRET_VARIABLE}"):
        fdcore_webhook.WebhookNotifier().open(
            "ops", {"webhook_env": URL_VARIABLE, "secret_env": SECRET_VARIABLE}
        )
