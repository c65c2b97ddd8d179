"""The archive: where retention moves finished requests, and how every reader finds them.

A request's files (``requests/<id>.json``, ``status/<id>.json``, ``runs/<id>/...``, and its
``cancels/<id>.json`` and ``retries/<id>.json`` when it has them) move to
``archive/YYYY/MM/DD/`` (the UTC day its status last changed), and ``archive/index/<id>.json``
says which day: a lookup by id is one read, however many years the archive holds.

A store has no rename, so a move is copy, then delete, in an order that keeps every state a crash
can leave readable and counted once (docs/retention.md, "Why the order is safe"):

1. copy every run record, the cancel and retry link, the status and the request into the day
   folder (create-if-absent; a copy left by an earlier, cut-short move is checked, and one
   that differs is kept and reported: archived history is never replaced);
2. create the index entry: from here on readers use the archive copy, which is complete;
3. list the run records again (one its agent still owed may have landed meanwhile) and copy the
   new ones; delete the live run records, cancel and retry link, then the live request, then
   the live status, each with
   ``If-Match`` on the etag that was copied (a file changed meanwhile is not deleted).

A live request never loses its status before itself (an agent would take a request without a
status for unclaimed and run it again), and before step 2 the live copy is the only one readers
use. Running a move again finishes whatever an earlier one left; nothing is ever undone.

The other half of that order is :func:`create_status`, the one way a request's first status is
written (a claim, an expiry, an unclaimed cancel): create-if-absent, then confirm the request
file is still there. A create that lands after a move deleted the status also comes after the
move deleted the request (step 3 deletes the request first), so the confirmation finds it gone
and the status is withdrawn: a moved request is never claimed again (docs/retention.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime

import attrs

from fdcore.abc import read_mailbox_file
from fdcore.contract.ids import validate_id
from fdcore.contract.layout import (
    ARCHIVE_INDEX,
    RUNS,
    archive_index_key,
    archived_key,
    archived_runs_prefix,
    cancel_key,
    request_key,
    retry_key,
    status_key,
)
from fdcore.contract.models import ArchiveEntry, Cancel, Request, Retry, RunRecord, Status
from fdcore.errors import (
    AlreadyExists,
    ArchiveConflict,
    MailboxFileError,
    NotFound,
    PreconditionFailed,
)
from fdcore.mailbox.access import Mailbox

#: The most run records one request may have for a move (a bound on what one move reads).
MAX_RUNS_PER_REQUEST = 10_000


@attrs.frozen
class RequestFiles:
    """A request's files as readers see them: live, or archived (``day`` set)."""

    request_id: str
    request: Request | None
    status: Status | None
    runs: tuple[RunRecord, ...]
    day: str | None = None  # the archive day folder; None: the files are live
    cancel: Cancel | None = None  # an operator's cancel of it (``fdcore cancel``)
    # why its cancel file is no cancel (malformed: agents report it and run the request)
    cancel_problem: str | None = None
    retry: Retry | None = None  # the link to the request that ran it again (``fdcore retry``)

    @property
    def archived(self) -> bool:
        return self.day is not None


def archive_entry(mailbox: Mailbox, request_id: str) -> ArchiveEntry | None:
    """The index entry of an archived request (None: not archived). Raises MailboxFileError."""
    found = mailbox.read(ArchiveEntry, archive_index_key(request_id))
    return found.value if found is not None else None


def find_request_files(mailbox: Mailbox, request_id: str) -> RequestFiles | None:
    """A request's request, status and run records, from the archive if it is archived, else
    live; None if neither has it. Bounded reads; a malformed file raises MailboxFileError, but
    a malformed cancel, which is no cancel (reported, and in ``cancel_problem``).

    The index entry decides: it is written only once the archive copy is complete, so a
    request caught mid-move is read whole from one place, never half from each.
    """
    validate_id(request_id, "request id")
    entry = archive_entry(mailbox, request_id)
    if entry is not None:
        day = entry.day
        request = mailbox.read(Request, archived_key(day, request_key(request_id)))
        status = mailbox.read(Status, archived_key(day, status_key(request_id)))
        cancel_at = archived_key(day, cancel_key(request_id))
        retry = mailbox.read(Retry, archived_key(day, retry_key(request_id)))
        runs_prefix = archived_runs_prefix(day, request_id)
    else:
        request = mailbox.request(request_id)
        status = mailbox.status(request_id)
        if request is None and status is None:
            return None
        cancel_at = cancel_key(request_id)
        retry = mailbox.retry(request_id)
        runs_prefix = f"{RUNS}{request_id}/"
    cancel, cancel_problem = mailbox.read_or_problem(Cancel, cancel_at)
    runs = read_runs(mailbox, runs_prefix)
    return RequestFiles(
        request_id,
        request.value if request else None,
        status.value if status else None,
        tuple(runs),
        day=entry.day if entry is not None else None,
        cancel=cancel.value if cancel else None,
        cancel_problem=cancel_problem,
        retry=retry.value if retry else None,
    )


def read_runs(mailbox: Mailbox, runs_prefix: str) -> list[RunRecord]:
    """The run records under ``runs_prefix`` (a request's runs folder, live or archived), at
    most :data:`MAX_RUNS_PER_REQUEST`; a malformed one is reported and left out."""
    runs = []
    for key in _limited(mailbox.storage.list(runs_prefix), MAX_RUNS_PER_REQUEST):
        found = mailbox.read_or_report(RunRecord, key)
        if found is not None:
            runs.append(found.value)
    return runs


def archived_ids(mailbox: Mailbox) -> Iterator[str]:
    """Ids of every archived request, from the index (one listing, in id order)."""
    return mailbox.ids(ARCHIVE_INDEX)


def archive_files(mailbox: Mailbox, request_id: str, day: str, archive: bool, now: datetime) -> int:
    """Move (``archive``) or delete one finished request's files; return how many live files
    it removed. Safe to run again after a crash at any point, and by two processes at once.

    The caller has read the status and judged it final and old enough (:mod:`fdcore.agent.
    retention`); the status read here is the one copied and deleted with ``If-Match``.
    Raises ArchiveConflict when a live file changed meanwhile (nothing more is deleted) or the
    request has more than MAX_RUNS_PER_REQUEST run records (nothing is touched).
    """
    storage = mailbox.storage
    status_blob = mailbox.read_file(status_key(request_id))
    if status_blob is None:
        return 0  # another process finished this move
    request_blob = mailbox.read_file(request_key(request_id))
    runs_prefix = f"{RUNS}{request_id}/"
    run_keys = list(_limited(storage.list(runs_prefix), MAX_RUNS_PER_REQUEST + 1))
    if len(run_keys) > MAX_RUNS_PER_REQUEST:
        raise ArchiveConflict(runs_prefix, f"more than {MAX_RUNS_PER_REQUEST} run records")
    # The run records, and the operators' cancel and retry link: moved (or deleted) alike.
    side_keys = [*run_keys, cancel_key(request_id), retry_key(request_id)]
    side_blobs = [(key, mailbox.read_file(key)) for key in side_keys]
    runs = [(key, blob) for key, blob in side_blobs if blob is not None]
    if archive:
        for key, blob in runs:
            _copy(mailbox, archived_key(day, key), blob.data)
        _copy(mailbox, archived_key(day, status_key(request_id)), status_blob.data)
        if request_blob is not None:
            _copy(mailbox, archived_key(day, request_key(request_id)), request_blob.data)
        moved_runs = sum(1 for key, _ in runs if key.startswith(runs_prefix))
        entry = ArchiveEntry(request=request_id, day=day, archived_at=now, runs=moved_runs)
        # An earlier move got this far: its entry names this same day (the caller reads it).
        with contextlib.suppress(AlreadyExists):
            mailbox.create(archive_index_key(request_id), entry)
        listed = set(run_keys)
        # A run record its agent still owed may have landed since the listing above: listed
        # again now the entry is there, it moves too. One landing later sees the entry and
        # follows the request into the archive itself (follow_to_archive).
        for key in _limited(storage.list(runs_prefix), MAX_RUNS_PER_REQUEST):
            late = None if key in listed else mailbox.read_file(key)
            if late is not None:
                _copy(mailbox, archived_key(day, key), late.data)
                runs.append((key, late))
    removed = 0
    for key, blob in runs:
        removed += _delete(mailbox, key, blob.etag)
    if request_blob is not None:
        removed += _delete(mailbox, request_key(request_id), request_blob.etag)
    removed += _delete(mailbox, status_key(request_id), status_blob.etag)
    return removed


def create_status(mailbox: Mailbox, status: Status) -> str:
    """Create a request's first status, and confirm its request is still live; its etag.

    Raises AlreadyExists if the request has a status, and NotFound if its request file is gone
    once the create landed: retention moved (or deleted) the request, whose earlier status this
    create replaced in the live folder. That status is withdrawn (If-Match) before NotFound
    leaves: the request ended, and its history is the archive's.
    """
    request_id = status.request
    key = status_key(request_id)
    etag = mailbox.create(key, status)
    try:
        live = mailbox.read_file(request_key(request_id)) is not None
    except MailboxFileError:
        live = True  # there, if unreadable: the caller's reads report it
    if not live:
        with contextlib.suppress(NotFound, PreconditionFailed):
            mailbox.storage.delete(key, etag)
        raise NotFound(request_key(request_id), "moved by retention; the claim is withdrawn")
    return etag


def archived_status(mailbox: Mailbox, request_id: str) -> Status | None:
    """The status of a request retention moved (None if it is not archived, or has none)."""
    entry = archive_entry(mailbox, request_id)
    if entry is None:
        return None
    found = mailbox.read(Status, archived_key(entry.day, status_key(request_id)))
    return found.value if found is not None else None


def follow_to_archive(mailbox: Mailbox, request_id: str, key: str) -> None:
    """A run record just written (or found) live: if retention moved its request meanwhile,
    move the record after it. The move lists the request's run records again once its index
    entry is there, so a record is either listed by the move or lands after the entry, which
    this read sees: none is left live beside an archived request. Raises ArchiveConflict if
    the archive holds a different record under the same name (it is kept).
    """
    entry = archive_entry(mailbox, request_id)
    if entry is None:
        return
    blob = mailbox.read_file(key)
    if blob is None:
        return  # the move took it
    _copy(mailbox, archived_key(entry.day, key), blob.data)
    _delete(mailbox, key, blob.etag)


def _copy(mailbox: Mailbox, key: str, data: bytes) -> None:
    """Create ``key`` with ``data``; a copy an earlier move left stands if it is the same.

    One that differs is archived history (or a move's, of a file that changed since): it is
    never replaced. ArchiveConflict stops the move, so the live files stay for an operator.
    """
    for _ in range(2):  # a copy deleted by hand in between is written again
        try:
            mailbox.storage.create(key, data)
            return
        except AlreadyExists:
            pass
        existing = mailbox.read_file(key)
        if existing is None:
            continue
        if existing.data != data:
            raise ArchiveConflict(
                key, "an archived copy differs from the live file; the archive is kept as it is"
            )
        return
    raise ArchiveConflict(key, "the archived copy keeps changing")


def _delete(mailbox: Mailbox, key: str, etag: str) -> int:
    """Delete a live file if it is still the version copied; 0 if it is already gone."""
    try:
        mailbox.storage.delete(key, etag)
    except NotFound:
        return 0
    except PreconditionFailed:
        raise ArchiveConflict(
            key, "changed while it was being moved; left for the next run"
        ) from None
    return 1


def move_file(mailbox: Mailbox, key: str, to: str, archive: bool, bound: int) -> None:
    """Move (``archive``) or delete one live file that is never changed (an audit event): the
    copy first, then the delete If-Match. Raises UnreadableFile past ``bound``, ArchiveConflict
    as a request's move does."""
    blob = read_mailbox_file(mailbox.storage, key, bound)
    if blob is None:
        return
    if archive:
        _copy(mailbox, to, blob.data)
    _delete(mailbox, key, blob.etag)


def _limited(keys: Iterator[str], bound: int) -> Iterator[str]:
    for count, key in enumerate(keys):
        if count >= bound:
            return
        yield key
