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
from collections.abc import Sequence
from typing import Any

from fdcore import hookimpl
from fdcore.abc import Notification, Notifier
from fdcore.webhook import WEBHOOK_OPTIONS, Webhook, WebhookRefused, webhook_from
from fdcore_teams.card import envelope


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


class TeamsNotifier:
    """``notifier = "teams"``."""

    name = "teams"

    def open(self, route: str, options: dict[str, Any]) -> TeamsChannel:
        for option in options:
            if option not in WEBHOOK_OPTIONS:
                known = ", ".join(WEBHOOK_OPTIONS)
                raise ValueError(f"{option}: unknown option (teams takes {known})")
        return TeamsChannel(webhook_from(options, "Teams Workflows"))


@hookimpl
def fdcore_notifiers() -> Sequence[Notifier]:
    return [TeamsNotifier()]
