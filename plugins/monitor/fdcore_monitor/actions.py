"""What an operator may do from the page: cancel or retry a request, acknowledge an incident.

Off unless ``fdcore monitor --allow-actions``; then each needs the token the command printed at
start, sent in the ``X-Fdcore-Token`` header (a header a page of another site cannot send without
the monitor's consent, so a forged form post fails too) and compared in constant time. Each
action is recorded where the mailbox keeps who did it (the cancel file's ``by``, the retry link's
``by``, the incident's ``acknowledged_by``) and logged with who, when and from where.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from datetime import datetime, timezone

import attrs

from fdcore.incidents.book import IncidentBook, acknowledge
from fdcore.mailbox.access import Mailbox

log = logging.getLogger("fdcore.monitor")

TOKEN_HEADER = "X-Fdcore-Token"


class Refused(Exception):
    """An action this monitor will not do: HTTP 403 with this message."""


@attrs.frozen
class Actions:
    """The actions of one monitor: ``token`` None means actions are off."""

    token: str | None
    by: str  # who the mailbox records as doing them

    @property
    def allowed(self) -> bool:
        return self.token is not None

    def check(self, given: str | None) -> None:
        if self.token is None:
            raise Refused("actions are off: start fdcore monitor with --allow-actions")
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            raise Refused(f"missing or wrong token (the {TOKEN_HEADER} header)")

    def run(
        self,
        name: str,
        subject: str,
        given: str | None,
        client: str,
        act: Callable[[datetime], str],
    ) -> str:
        """Check the token, then ``act(now)``; log who did what, when and from where."""
        try:
            self.check(given)
        except Refused as exc:
            log.warning("monitor: refused %s %s from %s: %s", name, subject, client, exc)
            raise
        now = datetime.now(timezone.utc)
        result = act(now)
        log.info(
            "monitor: %s %s by %s from %s at %s: %s", name, subject, self.by, client, now, result
        )
        return result


def acknowledge_incident(mailbox: Mailbox, incident: str, now: datetime, by: str) -> str:
    found = IncidentBook(mailbox).change(lambda d: acknowledge(d, incident, now, by))
    return f"{found.id} acknowledged by {by}"
