"""Submitting a request: one create-if-absent of ``requests/<id>.json``."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone

from fdcore.contract.layout import request_key
from fdcore.contract.models import Request
from fdcore.mailbox.access import Mailbox


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
    """Write a new request into the mailbox (create-if-absent); return it."""
    now = now or datetime.now(timezone.utc)
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
