"""Submitting a request: one create-if-absent of ``requests/<id>.json``.

An id given by the caller is first looked up in the archive index: a request retention moved
away keeps its id (a second request under it would run again, and hide behind the archived one
in ``fdcore queue --all``)."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone

from fdcore.contract.layout import archive_index_key, request_key
from fdcore.contract.models import Request
from fdcore.errors import AlreadyExists
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archive_entry


def new_request_id(now: datetime) -> str:
    return f"req-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def submit(
    mailbox: Mailbox,
    entities: list[str],
    *,
    request_id: str | None = None,
    max_attempts: int | None = None,
    deadline: datetime | None = None,
    now: datetime | None = None,
    created_by: str | None = None,
) -> Request:
    """Write a new request into the mailbox (create-if-absent); return it.

    Raises AlreadyExists if a request of that id is live or archived.
    """
    now = now or datetime.now(timezone.utc)
    if request_id is not None and archive_entry(mailbox, request_id) is not None:
        raise AlreadyExists(archive_index_key(request_id), "archived by retention")
    request = Request(
        id=request_id or new_request_id(now),
        entities=entities,
        created_at=now,
        created_by=created_by,
        deadline=deadline,
        max_attempts=max_attempts,
    )
    mailbox.create(request_key(request.id), request)
    return request
