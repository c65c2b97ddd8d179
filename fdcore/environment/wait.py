"""Waiting for one request to end: what ``Environment.wait`` (and its asyncio twin) repeats.

A look reads the request's status file only, and only if it may have changed: where the store
tells cheaply that a file is unchanged (:class:`~fdcore.abc.ChangeCheck`, a ``stat`` on a local
folder) not even that. Only when the status changed is the whole story read again (its request,
runs, cancel and retry link), so a long wait costs one small read per look. A request whose
status is gone was archived by retention: its story is read from the archive.

Every look is total: a malformed or hostile status file (garbage, a FIFO, a link, too large)
and a store briefly unavailable are problems (reported once, kept in :attr:`RequestWait.problem`)
and the wait goes on until it ends or times out; only an unknown request raises, at the start.
Closing the environment ends a wait too (:class:`~fdcore.errors.EnvironmentClosed`): it looks no
more at a store that is being closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from fdcore.abc import ChangeCheck
from fdcore.contract.layout import request_key, status_key
from fdcore.contract.models import State
from fdcore.environment.views import RequestStory, request_story
from fdcore.errors import (
    EnvironmentClosed,
    MailboxFileError,
    RequestCancelled,
    RequestDidNotSucceed,
    RequestExpired,
    RequestFailed,
    StorageUnavailable,
    WaitTimedOut,
)
from fdcore.mailbox.access import Mailbox

__all__ = ["FINAL_STATES", "RequestWait", "ended"]

#: Seconds a wait that saw the final status waits on for the run record of the table that ended
#: the request: an agent writes it just after the status (the status proves the run), so a story
#: read as the status lands may lack it, and with it the failed table's output tail.
RECORD_GRACE = 2.0
#: Seconds between two reads of the story while it waits for that record.
RECORD_LOOK = 0.02

#: The etag a wait keeps for a status no reader reads (a FIFO, a link, too large): a problem.
UNREADABLE = "<unreadable>"

#: The states a request ends in.
FINAL_STATES = frozenset(state.value for state in State if state.final)

_DID_NOT_SUCCEED: dict[str, type[RequestDidNotSucceed]] = {
    State.FAILED.value: RequestFailed,
    State.EXPIRED.value: RequestExpired,
    State.CANCELLED.value: RequestCancelled,
}


def ended(story: RequestStory) -> RequestStory:
    """``story`` if its request succeeded; else raise the error of how it ended
    (:class:`~fdcore.errors.RequestFailed`, ``RequestExpired``, ``RequestCancelled``)."""
    error = _DID_NOT_SUCCEED.get(story.state)
    if error is None:
        return story
    why = story.why or ""
    failed = [run for run in story.runs if run.outcome == State.FAILED.value]
    if failed and failed[-1].table not in why:  # name the failed table
        run = failed[-1]
        exit_code = f", exit {run.exit_code}" if run.exit_code else ""
        why = f"{why} (table {run.table}{exit_code})".strip()
    raise error(story.id, story.state, story, why or None)


def _has_last_record(story: RequestStory) -> bool:
    """Whether ``story`` holds the run record of the table that ended its request: the last
    table's for a success, the failed table's for a failure; nothing to hold otherwise."""
    if story.state == State.SUCCEEDED.value:
        last = story.request.entities[-1]
        return any(run.table == last and run.outcome == "succeeded" for run in story.runs)
    if story.state == State.FAILED.value and story.attempts:
        attempt = story.attempts[-1]
        if attempt.outcome == State.FAILED.value:
            return any(
                run.attempt == attempt.number and run.outcome == "failed" for run in story.runs
            )
    return True


class RequestWait:
    """The looks of one wait for request ``request_id``: :meth:`look` until :attr:`final`."""

    def __init__(
        self,
        mailbox: Mailbox,
        request_id: str,
        timeout: float | None = None,
        closed: threading.Event | None = None,
    ) -> None:
        self.mailbox = mailbox
        self.closed = closed or threading.Event()  # the environment's: set, the wait ends
        self.request_id = request_id
        if timeout is not None and not timeout >= 0:  # NaN too
            raise ValueError(
                f"timeout must be a number of seconds, 0 or more (None: no limit), got {timeout!r}"
            )
        self.timeout = timeout  # seconds (None: as long as it takes)
        self._give_up = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        self.story: RequestStory | None = None  # as last read
        self.problem: str | None = None  # why the last look could not read it, if it could not
        self._key = status_key(request_id)
        self._check = mailbox.storage if isinstance(mailbox.storage, ChangeCheck) else None
        self._etag: str | None = None  # of the status the story was read at (None: absent)
        self._request_etag: str | None = None
        self._reported: RequestStory | None = None  # the story progress was last told
        self._final_since: float | None = None  # when a look first found it final

    def reported(self) -> bool:
        """Whether the story is one progress has not been told yet (and count it told). A
        final story is told once, as the wait ends: not first without the run record that
        ended the request, then again with it."""
        if self.story is None or self.story == self._reported:
            return False
        if self.final and not self.over():
            return False
        self._reported = self.story
        return True

    def start(self) -> None:
        """The first look: raises :class:`~fdcore.errors.RequestNotFound` (or ``InvalidId``)
        for an unknown request; a file it cannot read yet is a problem, as in any look.
        Raises :class:`~fdcore.errors.EnvironmentClosed` if the environment is closed."""
        if self.closed.is_set():
            raise EnvironmentClosed(self.request_id, self.state, self.story)
        self._unless_closed(self._first_look)

    def _first_look(self) -> bool:
        try:
            request = self.mailbox.read_file(request_key(self.request_id))
            self._request_etag = request.etag if request else None
        except (StorageUnavailable, MailboxFileError) as exc:
            self.problem = str(exc)
        return self.look()

    @property
    def final(self) -> bool:
        return self.story is not None and self.story.state in FINAL_STATES

    @property
    def state(self) -> str:
        """The request's state as last read (``unknown`` before any story could be read)."""
        return self.story.state if self.story is not None else "unknown"

    def finished(self) -> bool:
        """Whether the wait is over: the request ended and the story holds the run record of
        the table that ended it (or :data:`RECORD_GRACE` passed without it)."""
        story = self.story
        if story is None or not self.final:
            return False
        if _has_last_record(story):
            return True
        now = time.monotonic()
        if self._final_since is None:
            self._final_since = now
        return now - self._final_since >= RECORD_GRACE

    def over(self) -> bool:
        """Whether to stop looking: :meth:`finished`, out of time, or the environment closed."""
        return self.finished() or self._left() == 0.0 or self.closed.is_set()

    def outcome(self) -> RequestStory:
        """The end of a wait that is :meth:`over`: the final story if it succeeded; else raise
        how it ended (:func:`ended`), :class:`~fdcore.errors.EnvironmentClosed` or
        :class:`~fdcore.errors.WaitTimedOut`."""
        if self.final and self.story is not None:
            return ended(self.story)  # at the timeout or a close, maybe without its last record
        if self.closed.is_set():
            raise EnvironmentClosed(self.request_id, self.state, self.story)
        raise WaitTimedOut(self.request_id, float(self.timeout or 0.0), self.state, self.story)

    def pause(self, poll: float) -> float:
        """Seconds until the next look at the latest (sooner if the store's watch wakes it)."""
        pause = RECORD_LOOK if self.final else poll
        left = self._left()
        return pause if left is None else min(pause, left)

    def _left(self) -> float | None:
        if self._give_up is None:
            return None
        return max(0.0, self._give_up - time.monotonic())

    def next_look(self) -> bool:
        """The look after a pause: the status, or while it waits for the last run record, the
        whole story."""
        return self._unless_closed(lambda: self.look(story=self.final))

    def _unless_closed(self, look: Callable[[], bool]) -> bool:
        """``look()``, but none once the environment is closed: its store is closed or closing,
        and one closed under a read fails in its own way (no fdcore error). The wait then ends
        (:meth:`over`) with :class:`~fdcore.errors.EnvironmentClosed`."""
        if self.closed.is_set():
            return False
        try:
            return look()
        except Exception:
            if self.closed.is_set():
                return False
            raise

    def look(self, *, story: bool = False) -> bool:
        """Read the status if it may have changed, and the story if it did; True if the story
        is new. Never raises for a bad file or an unavailable store (see :attr:`problem`); an
        unknown request (deleted by hand meanwhile) is :class:`~fdcore.errors.RequestNotFound`.
        """
        try:
            etag = self._status_etag()
            if self.story is not None and not story and not self._changed(etag):
                return False
            found = request_story(self.mailbox, self.request_id)
        except StorageUnavailable as exc:  # a moment's outage: the next look tries again
            self.problem = str(exc)
            return False
        except MailboxFileError as exc:  # this version of a file is bad: not read again
            self.mailbox.problems.report(self._key, str(exc))
            self.problem = str(exc)
            self._etag = etag
            return False
        self.problem = None
        self._etag = etag
        changed = found != self.story
        self.story = found
        return changed

    def _status_etag(self) -> str | None:
        """The status's etag now (None: absent; :data:`UNREADABLE`: no file a reader reads),
        without a read where the store tells it is unchanged."""
        if self.story is not None and self.story.archived:
            return self._etag  # archived: final, nothing changes any more
        known = self._etag
        if known is not None and known != UNREADABLE and self._unchanged(self._key, known):
            return known
        try:
            blob = self.mailbox.read_file(self._key)
        except MailboxFileError as exc:  # a FIFO, a link, a folder, over the bound
            self.mailbox.problems.report(self._key, str(exc))
            self.problem = str(exc)
            return UNREADABLE
        return blob.etag if blob else None

    def _changed(self, etag: str | None) -> bool:
        """Whether the story must be read again, the status's etag being ``etag`` now."""
        if etag != self._etag:
            return True
        if etag is not None or (self.story is not None and self.story.archived):
            return False
        # No status, as before: waiting still, or gone with its request into the archive.
        key = request_key(self.request_id)
        if self._request_etag is not None and self._unchanged(key, self._request_etag):
            return False
        return self.mailbox.read_file(key) is None

    def _unchanged(self, key: str, etag: str) -> bool:
        return self._check is not None and self._check.unchanged(key, etag)
