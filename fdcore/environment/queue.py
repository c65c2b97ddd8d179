"""The queue of an environment: its rows, read again only where something changed, and one page
of them, filtered and counted.

A request file never changes (a retry or a cancel is a new file), nor does a status once final:
a :class:`QueueReader` reads through the mailbox index (:mod:`fdcore.mailbox.index`), which
reads each of them once, and keeps the rows, so a look at a queue of thousands of finished
requests costs the listings of ``requests/``, ``status/`` and ``cancels/`` and the reads of what
changed; and once every row is finished, one read of the change signal
(:mod:`fdcore.mailbox.signal`) while nothing new was submitted. ``fdcore queue`` (and
``--watch``), the monitor's pages and its ``/metrics`` read through one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TypeVar

import attrs

from fdcore.contract.layout import (
    archive_index_key,
    archived_key,
    request_key,
    status_key,
)
from fdcore.contract.models import ArchiveEntry, Request, Status
from fdcore.environment.views import QueueRow, queue_row
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archived_ids
from fdcore.mailbox.index import MailboxIndex
from fdcore.mailbox.signal import QuietLook

__all__ = [
    "ACTIVE_STATES",
    "QueueFilter",
    "QueuePage",
    "QueueReader",
    "queue_page",
    "queue_rows",
    "unfinished",
]

T = TypeVar("T")

#: The states of a request not finished yet (the queue's ``active`` filter).
ACTIVE_STATES = ("waiting", "accepted", "running")


def _read(mailbox: Mailbox, cls: type[T], key: str) -> tuple[T | None, str | None]:
    """The file at ``key`` and, if it cannot be read, why (reported once)."""
    found, problem = mailbox.read_or_problem(cls, key)
    return (found.value if found else None), problem


class QueueReader:
    """One environment's queue, read through a :class:`~fdcore.mailbox.index.MailboxIndex` kept
    between looks: each look lists ``requests/``, ``status/`` and ``cancels/`` and reads only the
    files that may have changed (a request file and a final status once, a cancel once).

    A row is made again only when its request's or status's entry changed; rows of requests
    gone from ``requests/`` (archived, or deleted by hand) are forgotten with them.
    """

    def __init__(self, mailbox: Mailbox, index: MailboxIndex | None = None) -> None:
        self.mailbox = mailbox
        self.index = index or MailboxIndex(mailbox)
        # request id -> (its request entry, its status entry, a folder in its status's place, the
        # row made of them)
        self._rows: dict[str, tuple[object, object, str | None, QueueRow]] = {}
        # request id -> why its unlisted status is unreadable (None: absent), read once
        self._unlisted: dict[str, str | None] = {}
        # The last look's listings (as the index returned them) and every live row it made,
        # oldest first: with a versioned listing, the same listings again mean the same rows.
        self._last: tuple[tuple[object, ...], list[QueueRow]] | None = None
        # With every row finished, a look reads the change signal and lists only when it moved.
        self._quiet = QuietLook(mailbox, make=False)
        self._lock = threading.Lock()  # the monitor's pages look from several threads at once

    def rows(self, include_final: bool = True, include_archived: bool = False) -> list[QueueRow]:
        """One row per request, oldest first: the live ones, and with ``include_archived`` the
        archived ones too.

        A request caught mid-move is listed once, as archived: its index entry exists only once
        the archive holds every file of it (fdcore.mailbox.archive).
        """
        with self._lock:
            return self._look(include_final, include_archived)

    def _look(self, include_final: bool, include_archived: bool) -> list[QueueRow]:
        if include_archived:
            archived = set(archived_ids(self.mailbox))
            rows = self._live(archived) + _archived_rows(self.mailbox, archived)
            rows.sort(key=lambda row: (row.created_at is None, row.created_at, row.id))
        else:
            rows = self._live(set())
        if include_final:
            return rows
        return [row for row in rows if unfinished(row)]

    def _live(self, archived: set[str]) -> list[QueueRow]:
        """A row per listed request not in ``archived``, oldest first (a new list each time)."""
        index = self.index
        last = self._last
        started = time.monotonic()
        # Nothing open (or nothing known yet): read the signal before listing, and skip the
        # listing while it says nothing was submitted since the last one.
        quiet = not archived and (last is None or not any(map(unfinished, last[1])))
        if quiet and self._quiet.may_skip(started) and last is not None:
            return list(last[1])
        requests = index.requests.list()
        with_status = index.statuses.list()  # a request with none is waiting: nothing to read
        cancelled = index.cancels.list()  # a cancel is read only while its request is pending
        # A versioned listing equal to the last one is returned as the same object (the index
        # compares it at C speed): nothing listed changed, so no row did. This makes a look with
        # nothing changed cost the listings, not a pass over every request.
        listings = (requests, with_status, cancelled, index.statuses.misplaced)
        self._quiet.listed(started)
        if index.versioned and not archived and last and _same(last[0], listings):
            return list(last[1])
        live = set(requests) - archived
        for gone in self._rows.keys() - live:
            del self._rows[gone]
        for seen in (self._unlisted.keys() & with_status.keys()) | (self._unlisted.keys() - live):
            del self._unlisted[seen]  # listed with a status now, or gone
        rows = []
        for request_id in sorted(live):
            row = self._row(request_id, request_id in with_status)
            if request_id in cancelled and row.state in ACTIVE_STATES:
                cancel = index.cancels.get(request_id)
                by = cancel.value.by if cancel.value else None
                row = attrs.evolve(row, cancelled_by=by, cancel_problem=cancel.problem)
            rows.append(row)
        rows.sort(key=lambda row: (row.created_at is None, row.created_at, row.id))
        if not archived:
            self._last = (listings, rows)
        return list(rows)

    def _row(self, request_id: str, has_status: bool) -> QueueRow:
        request = self.index.requests.get(request_id)
        status = self.index.statuses.get(request_id) if has_status else None
        # No status listed: waiting; or something unreadable in its place, as a folder.
        misplaced = None if has_status else self._unlisted_status(request_id)
        kept = self._rows.get(request_id)
        if kept and kept[0] is request and kept[1] is status and kept[2] == misplaced:
            return kept[3]  # nothing changed: the same row
        problem = request.problem or (status.problem if status else None) or misplaced
        row = queue_row(request_id, request.value, status.value if status else None, problem)
        self._rows[request_id] = (request, status, misplaced, row)
        return row

    def _unlisted_status(self, request_id: str) -> str | None:
        """Why the status of a request whose status is not listed cannot be read, if it cannot:
        a folder with files in its place (from the listing), or one a listing does not show,
        as an empty folder (its status read once, when its request is first seen waiting)."""
        misplaced = self.index.statuses.misplaced.get(request_id)
        if misplaced is None and request_id not in self._unlisted:
            found, problem = self.mailbox.read_or_problem(Status, status_key(request_id))
            self._unlisted[request_id] = problem if found is None else None
        return misplaced or self._unlisted.get(request_id)


def unfinished(row: QueueRow) -> bool:
    """Whether a row is shown without the finished ones (``fdcore queue --active``): not
    finished yet, or unreadable (stuck: its operator must hear of it)."""
    return row.state in ACTIVE_STATES or row.state == "unreadable"


def _same(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    return all(a is b for a, b in zip(before, now, strict=True))


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
        """Whether ``row`` is one this filter shows."""
        return (
            self._state(row)
            and self._schedule(row)
            and (not self.agent or any(a.agent == self.agent for a in row.attempts))
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
    ``offset``, newest first; an offset past the end gives the last page."""
    matching = [row for row in reversed(rows) if where.matches(row)]
    last = (len(matching) - 1) // limit * limit if matching else 0  # the last page's start
    offset = max(0, min(offset, last))
    return QueuePage(
        rows=matching[offset : offset + limit],
        matching=len(matching),
        offset=offset,
        counts=dict(Counter(row.state for row in rows)),
        schedules=sorted({row.schedule for row in rows if row.schedule}),
        agents=sorted({a.agent for row in rows for a in row.attempts}),
    )
