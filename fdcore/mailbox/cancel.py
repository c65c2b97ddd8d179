"""Cancelling a request: ``cancels/<id>.json``, a file of its own (requests never change).

The cancel is created with create-if-absent, so of operators racing one cancel stands. A request
nobody holds (never claimed, or handed back) ends ``cancelled`` here at once; a held one is
stopped by its holder at its next poll (:mod:`fdcore.agent.cancels`), and no agent claims or
takes over a cancelled request.
"""

from __future__ import annotations

import copy
from datetime import datetime

import attrs

from fdcore.contract.ids import validate_id
from fdcore.contract.layout import cancel_key, status_key
from fdcore.contract.models import Cancel, State, Status
from fdcore.errors import AlreadyExists, NotFound, PreconditionFailed, RequestError, UnknownRequest
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import RequestFiles, create_status, find_request_files


@attrs.frozen
class Cancellation:
    """What ``cancel_request`` did: the cancel that stands and the request's status after it."""

    cancel: Cancel
    created: bool  # False: an earlier cancel of the request stands (it is the one returned)
    status: Status | None  # None: still unclaimed (only when its status could not be written)

    @property
    def state(self) -> str:
        """``cancelled`` once it ended, ``running``/``accepted`` while its holder has yet to stop
        it."""
        return self.status.state.value if self.status else "waiting"


def known_request(mailbox: Mailbox, request_id: str) -> RequestFiles:
    """The request's files, live or archived by retention; :class:`UnknownRequest` if the
    environment has no such request."""
    validate_id(request_id, "request id")
    files = find_request_files(mailbox, request_id)
    if files is None or files.request is None:
        raise UnknownRequest(request_id, mailbox.storage.url)
    return files


def cancel_request(
    mailbox: Mailbox, request_id: str, *, by: str, reason: str | None, now: datetime
) -> Cancellation:
    """Cancel the request: create its cancel file, and end it at once if nobody holds it.

    Refuses (:class:`RequestError`) a request that already ended; cancelling twice returns the
    first cancel (``created`` False). A malformed cancel file, which is no cancel, is replaced.
    """
    files = known_request(mailbox, request_id)
    if files.archived:  # only final requests are archived
        ended = files.status.state.value if files.status else "long ago"
        raise RequestError(f"request {request_id} already ended {ended}; nothing to cancel")
    found = mailbox.status(request_id)
    if found is not None and found.value.state.final:
        raise RequestError(
            f"request {request_id} already ended {found.value.state.value}; nothing to cancel"
        )
    cancel = Cancel(request=request_id, by=by, at=now, reason=reason or None)
    key = cancel_key(request_id)
    created = True
    try:
        mailbox.create(key, cancel)
    except AlreadyExists:
        created = False
        before = mailbox.read_file(key)  # its etag first: only the malformed version is replaced
        standing, problem = mailbox.read_or_problem(Cancel, key)
        if standing is not None:
            cancel = standing.value
        elif problem is not None and before is not None:
            # A malformed cancel is none (agents run the request): this one takes its place.
            mailbox.replace(key, cancel, before.etag)
            created = True
    return Cancellation(cancel, created, end_unheld(mailbox, cancel, now))


def end_unheld(mailbox: Mailbox, cancel: Cancel, now: datetime) -> Status | None:
    """End a cancelled request nobody holds: create its ``cancelled`` status (as an expiry does),
    or mark a handed-back one cancelled with If-Match. A held request is left to its holder.

    Returns the status as it stands after (None if it could not be created).
    """
    key = status_key(cancel.request)
    for _ in range(3):  # a claim or a hand-back may land between the read and the write
        found = mailbox.status(cancel.request)
        if found is None:
            status = Status.ended_unclaimed(cancel.request, State.CANCELLED, cancel.describe(), now)
            try:
                create_status(mailbox, status)
            except AlreadyExists:
                continue
            except NotFound:
                return None  # it ended and retention moved it meanwhile: nothing to cancel
            return status
        if found.value.state.final or found.value.agent is not None:
            return found.value
        status = copy.deepcopy(found.value)
        status.state = State.CANCELLED
        status.message = cancel.describe()
        status.updated_at = now
        try:
            mailbox.replace(key, status, found.etag)
        except (PreconditionFailed, NotFound):
            continue
        return status
    found = mailbox.status(cancel.request)
    return found.value if found else None
