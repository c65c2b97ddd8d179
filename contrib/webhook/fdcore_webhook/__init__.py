"""fdcore-webhook: the ``webhook`` notifier, each notification a JSON POST signed with HMAC.

```toml
[notify.routes.ops]
notifier = "webhook"
webhook_env = "OPS_WEBHOOK_URL"      # the variable holding the URL
secret_env = "OPS_WEBHOOK_SECRET"    # the variable holding the HMAC key
timeout = "10s"
retry_for = "1m"
```

The body is the notification as JSON (times in ISO 8601 UTC; a digest lists its incidents under
``digest``). Two headers let the receiver check it came from a holder of the secret and is fresh:
``X-Fdcore-Timestamp`` (Unix seconds) and ``X-Fdcore-Signature``, ``sha256=`` and the hex
HMAC-SHA256 of ``<timestamp>.<body>`` under the secret. Neither the URL nor the secret appears in
any message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import attrs

from fdcore import hookimpl
from fdcore.abc import Notification, Notifier
from fdcore.webhook import WEBHOOK_OPTIONS, Webhook, secret_from, webhook_from

OPTIONS = (*WEBHOOK_OPTIONS, "secret_env")
SIGNATURE = "X-Fdcore-Signature"
TIMESTAMP = "X-Fdcore-Timestamp"


def body(notification: Notification) -> bytes:
    def value(_instance: object, _field: object, item: Any) -> Any:
        return item.isoformat() if isinstance(item, datetime) else item

    return json.dumps(attrs.asdict(notification, value_serializer=value), sort_keys=True).encode()


def signature(secret: bytes, timestamp: str, data: bytes) -> str:
    digest = hmac.new(secret, timestamp.encode() + b"." + data, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class WebhookChannel:
    def __init__(
        self, webhook: Webhook, secret: bytes, clock: Callable[[], float] = time.time
    ) -> None:
        self.webhook = webhook
        self._secret = secret
        self.clock = clock

    def __repr__(self) -> str:  # never the URL or the secret
        return f"WebhookChannel({self.webhook!r})"

    def send(self, notification: Notification) -> None:
        data = body(notification)
        timestamp = str(int(self.clock()))
        headers = {TIMESTAMP: timestamp, SIGNATURE: signature(self._secret, timestamp, data)}
        self.webhook.post(data, headers)


class WebhookNotifier:
    """``notifier = "webhook"``."""

    name = "webhook"

    def open(self, route: str, options: dict[str, Any]) -> WebhookChannel:
        for option in options:
            if option not in OPTIONS:
                raise ValueError(f"{option}: unknown option (webhook takes {', '.join(OPTIONS)})")
        _variable, secret = secret_from(options, "secret_env", "HMAC key")
        return WebhookChannel(webhook_from(options, "webhook"), secret.encode())


@hookimpl
def fdcore_notifiers() -> Sequence[Notifier]:
    return [WebhookNotifier()]
