"""Requests' state changes as they land: what ``Environment.changes()`` yields.

A :class:`ChangeTracker` looks at the queue through a mailbox index of its own
(:mod:`fdcore.mailbox.index`): a look lists ``requests/`` and ``status/`` and reads only the
statuses that may have changed (and each new request once), then says which requests' states
differ from the look before. Where the store can watch, a look follows each change at once;
elsewhere it comes every ``poll`` seconds, and a request that changed twice in between is seen
in its latest state only. Once every request is finished, a look reads the change signal
(:mod:`fdcore.mailbox.signal`) instead of listing, until something is submitted.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import attrs

from fdcore.mailbox.index import MailboxIndex
from fdcore.mailbox.signal import QuietLook

__all__ = ["Change", "ChangeTracker"]

#: A request whose request or status file is malformed (as ``fdcore queue`` says).
UNREADABLE = "unreadable"
#: A request with no status yet.
WAITING = "waiting"


@attrs.frozen
class Change:
    """Request ``request_id`` is in ``state`` now (a status state, ``waiting`` for one just
    submitted, or ``unreadable``), after ``previous`` (None: new since the last look); ``at``
    is when, by the writer's clock (its status's ``updated_at``, or the request's
    ``created_at``)."""

    request_id: str
    state: str
    previous: str | None
    at: datetime


class ChangeTracker:
    """The states of an environment's requests, look after look."""

    def __init__(self, index: MailboxIndex) -> None:
        self.index = index
        self.states: dict[str, str] | None = None  # None: not looked yet
        # With every request finished, a look reads the change signal and lists only when it
        # moved (a submission; a full listing now and then for what nobody announced).
        self._quiet = QuietLook(index.mailbox, make=False)

    def look(self) -> list[Change]:
        """The changes since the last look, oldest first (none at the first look: it is where
        changes start). Raises :class:`~fdcore.errors.StorageUnavailable` (nothing is lost: the
        next look finds them)."""
        started = time.monotonic()
        known_states = self.states
        # Nothing open (or nothing known yet): read the signal before listing; skip the listing
        # while nothing was submitted since the last one.
        quiet = known_states is None or not any(map(_open, known_states.values()))
        if quiet and self._quiet.may_skip(started) and known_states is not None:
            return []
        requests = self.index.requests.list()
        statuses = self.index.statuses.list()
        self._quiet.listed(started)
        known = self.states or {}
        states: dict[str, str] = {}
        changes: list[Change] = []
        for request_id in requests:
            state, at = self._state(request_id, request_id in statuses)
            states[request_id] = state
            previous = known.get(request_id)
            if state != previous:
                changes.append(Change(request_id, state, previous, at))
        first = self.states is None
        self.states = states
        return [] if first else sorted(changes, key=lambda change: change.at)

    def _state(self, request_id: str, has_status: bool) -> tuple[str, datetime]:
        if has_status:
            status = self.index.statuses.get(request_id).value
            if status is not None:
                return status.state.value, status.updated_at
        request = self.index.requests.get(request_id).value
        if request is None or has_status:  # its request or its status malformed
            return UNREADABLE, datetime.now(timezone.utc)
        return WAITING, request.created_at


def _open(state: str) -> bool:
    """A state that may change without an announcement: waiting, accepted, running (or a file
    that could not be read, which may be fixed)."""
    return state in (WAITING, "accepted", "running", UNREADABLE)
