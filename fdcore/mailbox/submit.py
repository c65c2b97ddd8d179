"""Submitting a request: one create-if-absent of ``requests/<id>.json``; and retrying one.

Submitting with an id is idempotent: a caller that lost the answer and submits again with the
same id and the same work gets the request that is there (live or archived by retention), and
nothing is queued twice; the same id naming other work is refused. The archive index is looked
up first: a request retention moved away keeps its id (a second request under it would run
again, and hide behind the archived one in ``fdcore queue --all``).

A retry is a new request (requests never change), linked both ways: it names the old request in
``retry_of``, and ``retries/<old id>.json`` names it. The link is created first, with
create-if-absent: of operators racing to retry a request, one wins, and a retry cut short
between the two writes is completed by the next ``retry`` of the same request. A request
retention archived is retried from the archive (its link, if any, moved with it).
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone

import attrs

from fdcore.contract.codec import format_time
from fdcore.contract.ids import validate_id
from fdcore.contract.layout import request_key, retry_key
from fdcore.contract.models import Request, Retry, State
from fdcore.errors import AlreadyExists, RequestError
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archive_entry, find_request_files
from fdcore.mailbox.cancel import known_request
from fdcore.mailbox.signal import announce

#: The final states a request may be retried from (a succeeded one has nothing to run again).
RETRYABLE = (State.FAILED, State.EXPIRED, State.CANCELLED)


def new_request_id(now: datetime) -> str:
    return f"req-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def deadline_from(deadline: datetime | timedelta, now: datetime) -> datetime:
    """The deadline a submission gives, a time or a duration from ``now``, as a time; a
    one-line ValueError if it has no time zone or is not after ``now`` (a request that would
    expire the moment it lands)."""
    at = now + deadline if isinstance(deadline, timedelta) else deadline
    if at.utcoffset() is None:
        raise ValueError(f"{at.isoformat()} has no time zone: give one")
    if at <= now:
        raise ValueError(
            f"{format_time(at)} is past: give a later time, or a duration from now such as 10m"
        )
    return at


def submit(
    mailbox: Mailbox,
    entities: list[str],
    *,
    request_id: str | None = None,
    max_attempts: int | None = None,
    deadline: datetime | timedelta | None = None,
    now: datetime | None = None,
    created_by: str | None = None,
) -> Request:
    """Write a new request into the mailbox (create-if-absent); return it.

    With ``request_id`` of a request that exists (live or archived) and names the same work
    (:data:`WORK_FIELDS`), return that request: a submission retried after a lost answer queues
    nothing twice. A ``deadline`` given as a duration is from the request's creation: the same
    duration submitted again names the same work, whenever it is submitted again. Raises
    :class:`RequestError` if it names other work, or if the new request's status could not hold
    every table done within the mailbox's size bound (an agent with that bound would fail it at
    once); MailboxFileError if the request there is malformed.
    """
    now = now or datetime.now(timezone.utc)
    relative = deadline if isinstance(deadline, timedelta) else None
    request = Request(
        id=request_id or new_request_id(now),
        entities=entities,
        created_at=now,
        created_by=created_by,
        deadline=now + deadline if isinstance(deadline, timedelta) else deadline,
        max_attempts=max_attempts,
    )
    if request_id is not None:
        standing = _standing(mailbox, request, relative)
        if standing is not None:
            return standing
    _refuse_unfit(mailbox, request)
    try:
        mailbox.create(request_key(request.id), request)
    except AlreadyExists:
        # Created since the look above (or gone again, archived): decide on what is there now.
        standing = _standing(mailbox, request, relative)
        if standing is None:
            raise
        return standing
    announce(mailbox)
    return request


#: What makes two requests of one id the same work; who submitted it and when do not count.
WORK_FIELDS = ("entities", "deadline", "max_attempts", "schedule", "affinity", "retry_of")


def work_differences(one: Request, other: Request) -> list[str]:
    """The fields of :data:`WORK_FIELDS` in which ``other`` differs from ``one``, each as
    ``field=<other's value>``; empty if they name the same work."""
    return [
        f"{name}={_shown(getattr(other, name))}"
        for name in WORK_FIELDS
        if getattr(one, name) != getattr(other, name)
    ]


def _shown(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)


def _standing(
    mailbox: Mailbox, request: Request, relative: timedelta | None = None
) -> Request | None:
    """The request already under ``request.id`` (live, else archived) if it names the same
    work; None if there is none; RequestError if it names other work. With ``relative``, the
    deadline compared is that long after the standing request's creation."""
    live = mailbox.request(request.id)
    if live is not None:
        standing, where = live.value, ""
    elif archive_entry(mailbox, request.id) is not None:
        files = find_request_files(mailbox, request.id)
        if files is None or files.request is None:
            raise RequestError(f"request {request.id} is archived without its request file")
        standing, where = files.request, " (archived)"
    else:
        return None
    if relative is not None and standing.created_at is not None:
        request = attrs.evolve(request, deadline=standing.created_at + relative)
    differences = work_differences(request, standing)
    if differences:
        raise RequestError(
            f"request {request.id} already exists{where} with other work "
            f"({' '.join(differences)}): submit it under another id"
        )
    return standing


def _refuse_unfit(mailbox: Mailbox, request: Request) -> None:
    """RequestError if ``request`` could not run through within the mailbox's size bound."""
    unfit = mailbox.unfit(request)
    if unfit is not None:
        raise RequestError(f"request {request.id} not submitted: {unfit}")


def retry_request(
    mailbox: Mailbox,
    request_id: str,
    *,
    from_table: str | None = None,
    by: str,
    now: datetime,
    retry_id: str | None = None,
) -> Request:
    """Queue a new request running a failed, expired or cancelled request's tables again (from
    ``from_table`` on, if given) under ``retry_id`` (default: a new id); return it. Refuses
    (:class:`RequestError`) a request that has not ended, that succeeded, or that was already
    retried (but with the ``retry_id`` of that retry, returns it: a retry repeated after a lost
    answer), and a table it does not have.

    The new request keeps the old one's ``max_attempts`` and ``affinity``; not its deadline
    (which has passed for an expired one) nor its schedule slot (the slot was served).
    """
    files = known_request(mailbox, request_id)
    old = files.request
    assert old is not None  # known_request refuses a request whose file is gone
    entities = _tables_from(old, from_table)
    made = _made_retry(mailbox, files.retry, retry_id)
    if made is not None:
        return made  # this very retry was made already (an answer lost)
    state = files.status.state if files.status else None
    if files.archived and files.retry is not None:  # its link moved with it
        raise RequestError(
            f"request {request_id} was already retried as {files.retry.retry}; "
            f"retry {files.retry.retry} instead"
        )
    if state not in RETRYABLE:
        now_is = state.value if state else "waiting (not claimed yet)"
        raise RequestError(
            f"request {request_id} is {now_is}; only failed, expired or cancelled requests "
            "can be retried"
        )
    link = Retry(
        request=request_id,
        retry=retry_id or new_request_id(now),
        by=by,
        at=now,
        from_table=from_table,
    )
    _refuse_unfit(mailbox, Request(id=link.retry, entities=entities, created_at=now))
    try:
        mailbox.create(retry_key(request_id), link)
    except AlreadyExists:
        standing = mailbox.retry(request_id)
        if standing is None:  # removed since: try again from the start
            return retry_request(
                mailbox, request_id, from_table=from_table, by=by, now=now, retry_id=retry_id
            )
        link = standing.value
        made = _made_retry(mailbox, link, retry_id)
        if made is not None:
            return made  # a racing call made this very retry
        if mailbox.request(link.retry) is not None:
            raise RequestError(
                f"request {request_id} was already retried as {link.retry}; "
                f"retry {link.retry} instead"
            ) from None
        # A retry cut short after its link: complete it as the link says.
        entities = _tables_from(old, link.from_table)
    request = Request(
        id=link.retry,
        entities=entities,
        created_at=now,
        created_by=by,
        max_attempts=old.max_attempts,
        affinity=old.affinity,
        retry_of=request_id,
    )
    try:
        mailbox.create(request_key(request.id), request)
    except AlreadyExists:
        written = mailbox.request(request.id)
        if written is None or written.value.retry_of != request_id:
            raise RequestError(
                f"request {request.id}, the retry of {request_id}, is taken by another request"
            ) from None
        return written.value  # a racing completion of the same link wrote it
    announce(mailbox)
    return request


def _made_retry(mailbox: Mailbox, link: Retry | None, retry_id: str | None) -> Request | None:
    """The request ``link`` names, if it is the retry ``retry_id`` asks for and was made."""
    if retry_id is None or link is None or link.retry != retry_id:
        return None
    files = find_request_files(mailbox, retry_id)
    return files.request if files is not None else None


def _tables_from(request: Request, table: str | None) -> list[str]:
    if table is None:
        return list(request.entities)
    validate_id(table, "table name")
    if table not in request.entities:
        raise RequestError(
            f"table {table!r} is not one of request {request.id}'s tables "
            f"({', '.join(request.entities)})"
        )
    return request.entities[request.entities.index(table) :]
