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
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fdcore.environment import Environment
from fdcore.errors import FdcoreError

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
        act: Callable[[], str],
    ) -> str:
        """Check the token, then ``act()``; log who did what, when and from where."""
        try:
            self.check(given)
        except Refused as exc:
            log.warning("monitor: refused %s %s from %s: %s", name, subject, client, exc)
            raise
        now = datetime.now(timezone.utc)
        result = act()
        log.info(
            "monitor: %s %s by %s from %s at %s: %s", name, subject, self.by, client, now, result
        )
        return result


class ActionRoutes:
    """The POST routes of the page's buttons: each checks the token, acts through the
    monitor's :class:`fdcore.Environment` (as the commands do) and answers JSON: 200 with what
    was done, 403 refused here, 409 refused by the mailbox (the command's own one-line reason)."""

    def __init__(self, actions: Actions, environment: Environment) -> None:
        self.actions = actions
        self.environment = environment

    def _answer(
        self, request: Request, name: str, subject: str, act: Callable[[], str]
    ) -> Response:
        client = request.client.host if request.client else "?"
        try:
            message = self.actions.run(
                name, subject, request.headers.get(TOKEN_HEADER), client, act
            )
        except Refused as exc:
            return JSONResponse({"error": str(exc)}, status_code=403)
        except FdcoreError as exc:  # the mailbox refused: a final request, an unknown id...
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse({"message": message})

    def acknowledge(self, request: Request) -> Response:
        incident = request.path_params["id"]
        return self._answer(request, "acknowledge", incident, lambda: self._ack(incident))

    def _ack(self, incident: str) -> str:
        by = self.actions.by
        return f"{self.environment.acknowledge(incident, by=by).id} acknowledged by {by}"

    def cancel(self, request: Request) -> Response:
        request_id = request.path_params["id"]
        return self._answer(request, "cancel", request_id, lambda: self._cancel(request_id))

    def _cancel(self, request_id: str) -> str:
        by = self.actions.by
        done = self.environment.cancel(request_id, by=by, reason="from fdcore monitor")
        if not done.created:
            return f"{request_id} was already cancelled by {done.cancel.by}: {done.state}"
        return f"{request_id} cancelled by {by}: {done.state}"

    def retry(self, request: Request) -> Response:
        request_id = request.path_params["id"]
        return self._answer(request, "retry", request_id, lambda: self._retry(request_id))

    def _retry(self, request_id: str) -> str:
        by = self.actions.by
        new = self.environment.retry(request_id, by=by)
        return f"{request_id} retried by {by} as {new.id}"
