"""The message a Teams Workflows webhook accepts: an Adaptive Card 1.4 in a message envelope.

One incident is one card: its title, what is wrong, its kind, subject, first and last seen, how
often it occurred (as ``fdcore incidents show`` counts), and the exact ``fdcore incidents ack``
command. A digest is one card listing each incident the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fdcore.abc import Notification

CARD_VERSION = "1.4"
SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"


def _time(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value else "-"


def _text(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def incident_elements(notification: Notification) -> list[dict[str, Any]]:
    """The card elements that describe one incident."""
    facts = [
        ("Incident", notification.incident_id),
        ("Kind", notification.kind or "-"),
        ("Subject", notification.subject or "-"),
        ("First seen", _time(notification.first_seen)),
        ("Last seen", _time(notification.last_seen)),
        ("Occurrences", str(notification.count)),
        ("Severity", notification.severity),
    ]
    elements: list[dict[str, Any]] = [
        _text(notification.title, weight="Bolder", size="Medium"),
        _text(notification.text),
        {"type": "FactSet", "facts": [{"title": t, "value": v} for t, v in facts]},
    ]
    if notification.ack_command:
        elements.append(_text("Acknowledge with:", isSubtle=True, spacing="Small"))
        elements.append(_text(notification.ack_command, fontType="Monospace"))
    return elements


def card(notification: Notification) -> dict[str, Any]:
    """The Adaptive Card for one notification (a digest lists each of its incidents)."""
    heading = f"fdcore · {notification.environment}"
    if notification.escalation:
        heading += " · escalated: still open and unacknowledged"
    body: list[dict[str, Any]] = [_text(heading, isSubtle=True, size="Small")]
    if notification.digest:
        body.append(_text(notification.title, weight="Bolder", size="Large"))
        for item in notification.digest:
            body.append({"type": "Container", "separator": True, "items": incident_elements(item)})
    else:
        body.extend(incident_elements(notification))
    return {"type": "AdaptiveCard", "$schema": SCHEMA, "version": CARD_VERSION, "body": body}


def envelope(notification: Notification) -> dict[str, Any]:
    """The message envelope a Teams Workflows "post to a channel when a webhook request is
    received" flow accepts."""
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card(notification),
            }
        ],
    }
