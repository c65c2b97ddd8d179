"""fdcore-teams: the ``teams`` notifier, posting incidents to a Microsoft Teams Workflows webhook.

```toml
[notify.routes.data-oncall]
notifier = "teams"
webhook_env = "FDCORE_TEAMS_WEBHOOK"   # the variable holding the URL; never the URL itself
timeout = "10s"                        # per attempt (default 10s)
retry_for = "1m"                       # bound on all attempts of one post (default 1m)
```

The URL is read from the environment when the route is opened at start-up and appears in no log
line, file, exception or output: errors name the variable. A 4xx other than 429 is reported once
per route; later posts to the route fail at once with the same message until the agent restarts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from fdcore import hookimpl
from fdcore.abc import Notification, Notifier
from fdcore.durations import parse_duration
from fdcore.errors import DurationError
from fdcore_teams.card import envelope
from fdcore_teams.webhook import Webhook, WebhookRefused

OPTIONS = ("webhook_env", "timeout", "retry_for")


class TeamsChannel:
    """One route's Teams webhook."""

    def __init__(self, webhook: Webhook) -> None:
        self.webhook = webhook
        self.refused: str | None = None  # a configuration error: not posted again

    def send(self, notification: Notification) -> None:
        if self.refused is not None:
            raise WebhookRefused(f"{self.refused} (not posted again until the agent restarts)")
        body = json.dumps(envelope(notification)).encode()
        try:
            self.webhook.post(body)
        except WebhookRefused as exc:
            self.refused = str(exc)
            raise


def _seconds(options: dict[str, Any], key: str, default: float) -> float:
    value = options.get(key)
    if value is None:
        return default
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ValueError(f"{key}: {exc}") from None


def webhook_from(options: dict[str, Any], what: str) -> Webhook:
    """The webhook named by ``webhook_env``; ValueError naming the option (never the URL)."""
    variable = options.get("webhook_env")
    if not isinstance(variable, str) or not variable:
        raise ValueError(f"webhook_env: expected the name of the variable holding the {what} URL")
    url = os.environ.get(variable, "")
    if not url:
        raise ValueError(f"webhook_env: environment variable {variable} is not set")
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"webhook_env: {variable} does not hold an http(s) URL")
    return Webhook(
        url,
        variable,
        timeout=_seconds(options, "timeout", 10.0),
        retry_for=_seconds(options, "retry_for", 60.0),
    )


class TeamsNotifier:
    """``notifier = "teams"``."""

    name = "teams"

    def open(self, route: str, options: dict[str, Any]) -> TeamsChannel:
        for option in options:
            if option not in OPTIONS:
                raise ValueError(f"{option}: unknown option (teams takes {', '.join(OPTIONS)})")
        return TeamsChannel(webhook_from(options, "Teams Workflows"))


@hookimpl
def fdcore_notifiers() -> Sequence[Notifier]:
    return [TeamsNotifier()]
