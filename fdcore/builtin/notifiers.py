"""The ``log`` notifier: notifications written to the agent's log."""

from __future__ import annotations

import logging
from typing import Any

from fdcore.abc import Notification

log = logging.getLogger("fdcore.notify")


class _LogChannel:
    def __init__(self, route: str) -> None:
        self.route = route

    def send(self, notification: Notification) -> None:
        log.warning(
            "[%s] incident %s (%s): %s",
            self.route,
            notification.incident_id,
            notification.severity,
            notification.title,
        )


class LogNotifier:
    """``log``: write notifications to the agent's log (a warning on logger ``fdcore.notify``)."""

    name = "log"

    def open(self, route: str, options: dict[str, Any]) -> _LogChannel:
        for option in options:
            raise ValueError(f"{option}: unknown option (the log notifier takes none)")
        return _LogChannel(route)
