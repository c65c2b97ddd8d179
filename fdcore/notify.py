"""The notifier extension point: tell people about incidents."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import attrs


@attrs.frozen
class Notification:
    """What a notifier sends: one incident, opened or still open."""

    environment: str
    incident_id: str
    title: str
    severity: str
    text: str
    route: str


@runtime_checkable
class NotifierChannel(Protocol):
    def send(self, notification: Notification) -> None:
        """Deliver one notification; raise on a failure that retrying here will not mend."""


@runtime_checkable
class Notifier(Protocol):
    """A kind of notification channel (``log``, ``teams``)."""

    name: str

    def open(self, route: str, options: dict[str, Any]) -> NotifierChannel:
        """A channel for the route ``route`` configured with ``options`` from agent.toml."""
