"""The queue of an environment: its rows, read again only where something changed, and one page
of them, filtered and counted.

A request file never changes (a retry or a cancel is a new file), nor does a status once final:
a :class:`QueueReader` reads each of them once and keeps the row, so a look at a queue of
thousands of finished requests costs the listings of ``requests/``, ``status/`` and ``cancels/``
and the reads of the statuses still changing. ``fdcore queue`` (and ``--watch``), the monitor's
pages and its ``/metrics`` read through one.
"""

from __future__ import annotations

from collections import Counter
from typing import TypeVar

import attrs

from fdcore.contract.layout import (
    archive_index_key,
    archived_key,
    cancel_key,
    request_key,
    status_key,
)
from fdcore.contract.models import ArchiveEntry, Cancel, Request, Status
from fdcore.environment.views import QueueRow, queue_row
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archived_ids

T = TypeVar("T")

#: The states of a request not finished yet (the queue's ``active`` filter).
ACTIVE_STATES = ("waiting", "accepted", "running")


def _read(mailbox: Mailbox, cls: type[T], key: str) -> tuple[T | None, str | None]:
    """The file at ``key`` and, if it cannot be read, why (reported once)."""
    found, problem = mailbox.read_or_problem(cls, key)
    return (found.value if found else None), problem


class QueueReader:
    """One environment's queue, kept between looks: what never changes is read once.

    Kept: each request file read well (requests never change), each row whose status is final
    (it never changes either), each cancel read well (a cancel is created once). A request gone
    from ``requests/`` (moved to the archive) is forgotten. Everything else (statuses still
    changing, unreadable files) is read on each look.
    """

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        self._requests: dict[str, Request] = {}
        self._final: dict[str, QueueRow] = {}
        self._cancels: dict[str, Cancel] = {}

    def rows(self, include_final: bool = True, include_archived: bool = False) -> list[QueueRow]:
        """One row per request, oldest first: the live ones, and with ``include_archived`` the
        archived ones too.

        A request caught mid-move is listed once, as archived: its index entry exists only once
        the archive holds every file of it (fdcore.mailbox.archive).
        """
        mailbox = self.mailbox
        archived = set(archived_ids(mailbox)) if include_archived else set()
        live = set(mailbox.request_ids()) - archived
        with_status = set(mailbox.status_ids())  # a request with none is waiting: nothing to read
        cancelled = set(mailbox.cancel_ids())  # one listing; a cancel is read only while pending
        self._forget(live)
        rows = []
        for request_id in sorted(live):
            row = self._final.get(request_id) or self._row(
                request_id, request_id in with_status, request_id in cancelled
            )
            if include_final or row.state in ACTIVE_STATES or row.state == "unreadable":
                rows.append(row)
        rows.extend(_archived_rows(mailbox, archived))
        rows.sort(key=lambda row: (row.created_at is None, row.created_at, row.id))
        return rows

    def _forget(self, live: set[str]) -> None:
        """Drop what is kept of requests no longer live (archived, or deleted by hand)."""
        for kept in (self._requests, self._final, self._cancels):
            for gone in [request_id for request_id in kept if request_id not in live]:
                del kept[gone]

    def _row(self, request_id: str, has_status: bool, cancelled: bool) -> QueueRow:
        request, problem = self._request(request_id)
        status: Status | None = None
        if has_status:
            status, status_problem = _read(self.mailbox, Status, status_key(request_id))
            problem = problem or status_problem
        row = queue_row(request_id, request, status, problem)
        if status is not None and status.state.final and problem is None:
            self._final[request_id] = row
        if cancelled and row.state in ACTIVE_STATES:
            cancel, cancel_problem = self._cancel(request_id)
            by = cancel.by if cancel else None
            row = attrs.evolve(row, cancelled_by=by, cancel_problem=cancel_problem)
        return row

    def _request(self, request_id: str) -> tuple[Request | None, str | None]:
        request = self._requests.get(request_id)
        if request is not None:
            return request, None
        request, problem = _read(self.mailbox, Request, request_key(request_id))
        if request is not None:
            self._requests[request_id] = request
        return request, problem

    def _cancel(self, request_id: str) -> tuple[Cancel | None, str | None]:
        cancel = self._cancels.get(request_id)
        if cancel is not None:
            return cancel, None
        cancel, problem = _read(self.mailbox, Cancel, cancel_key(request_id))
        if cancel is not None:
            self._cancels[request_id] = cancel
        return cancel, problem


def _archived_rows(mailbox: Mailbox, archived: set[str]) -> list[QueueRow]:
    rows = []
    for request_id in sorted(archived):
        entry, problem = _read(mailbox, ArchiveEntry, archive_index_key(request_id))
        if entry is None:
            continue  # gone meanwhile, or unreadable (reported)
        request, request_problem = _read(
            mailbox, Request, archived_key(entry.day, request_key(request_id))
        )
        status, status_problem = _read(
            mailbox, Status, archived_key(entry.day, status_key(request_id))
        )
        problem = request_problem or status_problem
        rows.append(queue_row(request_id, request, status, problem, archived=entry.day))
    return rows


def queue_rows(
    mailbox: Mailbox, include_final: bool = True, include_archived: bool = False
) -> list[QueueRow]:
    """One row per request, oldest first, read afresh (:meth:`QueueReader.rows`)."""
    return QueueReader(mailbox).rows(include_final, include_archived)


@attrs.frozen
class QueueFilter:
    """Which requests a look at the queue shows; an empty field matches every request."""

    state: str = ""  # a request state, or "active" (not finished)
    schedule: str = ""  # a schedule id, or "none" (submitted by hand)
    agent: str = ""  # an agent that attempted it
    text: str = ""  # part of its id (any case)

    def matches(self, row: QueueRow) -> bool:
        return (
            self._state(row)
            and self._schedule(row)
            and (not self.agent or any(a["agent"] == self.agent for a in row.attempts))
            and (not self.text or self.text.lower() in row.id.lower())
        )

    def _state(self, row: QueueRow) -> bool:
        if self.state == "active":
            return row.state in ACTIVE_STATES
        return not self.state or row.state == self.state

    def _schedule(self, row: QueueRow) -> bool:
        if self.schedule == "none":
            return row.schedule is None
        return not self.schedule or row.schedule == self.schedule


@attrs.frozen
class QueuePage:
    """One page of the queue: the rows that match, newest first, and what the queue holds."""

    rows: list[QueueRow]  # this page's, newest first
    matching: int  # rows that match the filter, on every page
    offset: int  # of the first row shown, among those that match
    counts: dict[str, int]  # every request by state, whatever the filter
    schedules: list[str]  # the schedule ids of the queue's requests
    agents: list[str]  # the agents that attempted its requests

    @property
    def has_next(self) -> bool:
        return self.offset + len(self.rows) < self.matching


def queue_page(rows: list[QueueRow], where: QueueFilter, offset: int, limit: int) -> QueuePage:
    """The page of ``rows`` (oldest first, as read) that ``where`` selects: ``limit`` rows from
    ``offset``, newest first."""
    matching = [row for row in reversed(rows) if where.matches(row)]
    offset = max(0, min(offset, len(matching) - 1)) if matching else 0
    return QueuePage(
        rows=matching[offset : offset + limit],
        matching=len(matching),
        offset=offset,
        counts=dict(Counter(row.state for row in rows)),
        schedules=sorted({row.schedule for row in rows if row.schedule}),
        agents=sorted({a["agent"] for row in rows for a in row.attempts}),
    )
