"""The audit trail: one create-only file per workload action, ``audit/<id>.json``.

Every submit, cancel, retry and acknowledge (from a command, the Python API or the monitor), and
every takeover, expiry and retention move an agent makes, is one :class:`AuditEvent`: what, on
which request or object, who, from where, when, and how it ended. Each is created with
create-if-absent under a fresh time-sortable name, so no writer rewrites another's, and costs its
action one write. A write that fails is logged by its writer: the action it records stands.

Anyone who can write the mailbox can write a file here, so a reader trusts nothing blindly: each
file is read within :data:`AUDIT_MAX_BYTES`, decoded strictly, and checked against its name and
the store's own time of the write; what fails a check is shown as a row with its problems,
never as a trusted event (:class:`AuditRow`).
"""

from __future__ import annotations

import getpass
import logging
import secrets
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import attrs

from fdcore.abc import read_mailbox_file
from fdcore.contract.codec import decode, encode_within, format_time
from fdcore.contract.ids import is_valid_id
from fdcore.contract.layout import AUDIT, archive_day, archived_key, audit_key
from fdcore.contract.models import AUDIT_ACTIONS, AUDIT_ORIGINS, MAX_AUDIT_TEXT, AuditEvent
from fdcore.errors import FdcoreError, MailboxFileError, StorageUnavailable
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import move_file

log = logging.getLogger("fdcore.audit")

#: The largest audit file read: an event is a few hundred bytes; a bigger file is reported.
AUDIT_MAX_BYTES = 4096
#: How far the time an event claims may be from the store's time of its write.
CLOCK_TOLERANCE = timedelta(minutes=5)
#: The most names of ``audit/`` one read looks at (retention keeps far fewer live).
MAX_LISTED = 200_000
#: The most days of the archive one read lists (``archived``: one listing a day).
MAX_ARCHIVE_DAYS = 3660
_TIME_FORMAT = "%Y%m%dT%H%M%S"


def process_user() -> str:
    """Who runs this process: ``user@host`` (``unknown@host`` if the system cannot say)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no user name in the environment nor the password database
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


_last_named: datetime | None = None
_naming = threading.Lock()


def new_event_id(at: datetime) -> str:
    """``20260901T000000123Z-1a2b3c4d``: the time first (names sort by it), then 32 random bits.

    One process's events are named in the order it writes them: two in one millisecond would
    sort by their random bits, so a later one is named a millisecond after the one before (a
    trail's reader sorts by name; the name runs ahead of ``at`` by the few milliseconds of a
    burst at most, within the second :func:`_problems` allows)."""
    global _last_named
    utc = at.astimezone(timezone.utc)
    utc -= timedelta(microseconds=utc.microsecond % 1000)
    with _naming:
        # a clock more than a second behind the last name is another clock (a simulated
        # world's, one set back): its names start from it
        if _last_named is not None and _last_named - timedelta(seconds=1) < utc <= _last_named:
            utc = _last_named + timedelta(milliseconds=1)
        _last_named = utc
    return f"{utc.strftime(_TIME_FORMAT)}{utc.microsecond // 1000:03d}Z-{secrets.token_hex(4)}"


def time_of_id(event_id: str) -> datetime | None:
    """The time an event's name begins with; None if it begins with none."""
    try:
        stamp = datetime.strptime(event_id[:15], _TIME_FORMAT)
        millis = int(event_id[15:18])
    except ValueError:
        return None
    if event_id[18:20] != "Z-":
        return None
    return stamp.replace(tzinfo=timezone.utc) + timedelta(milliseconds=millis)


def one_line(text: str, limit: int = MAX_AUDIT_TEXT) -> str:
    """``text`` as an event holds it: unprintable characters as ``?``, cut to ``limit``."""
    shown = "".join(c if c.isprintable() else "?" for c in text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def record(
    mailbox: Mailbox,
    action: str,
    subject: str,
    *,
    actor: str,
    via: str,
    at: datetime,
    outcome: str = "ok",
    request: str | None = None,
    detail: str | None = None,
) -> AuditEvent | None:
    """Write one event (create-if-absent); None, logged, if the store refused or failed it.

    Never raises for the store: the action it records has happened (or was refused) already.
    """
    process = process_user()
    event = AuditEvent(
        id=new_event_id(at),
        action=action,
        subject=one_line(subject),
        actor=one_line(actor) or "unknown",
        via=via,
        at=at,
        outcome=one_line(outcome),
        request=request,
        process=None if process == actor else one_line(process),
        detail=None if detail is None else one_line(detail),
    )
    key = audit_key(event.id)
    try:
        mailbox.storage.create(key, encode_within(event, key, _bound(mailbox)))
    except FdcoreError as exc:  # unavailable, refused, over the bound
        log.warning("audit event %s %s by %s not written: %s", action, subject, actor, exc)
        return None
    return event


def _bound(mailbox: Mailbox) -> int:
    return min(mailbox.max_file_bytes, AUDIT_MAX_BYTES)


@attrs.frozen
class AuditRow:
    """One file of ``audit/`` as read: its event (None if unreadable) and what is wrong with it.

    ``stored_at`` is the store's own time of the write, where its listing says (else None);
    ``trusted`` only when the file decoded and passed every check.
    """

    key: str
    event: AuditEvent | None
    stored_at: datetime | None = None
    problems: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        return self.event is not None and not self.problems

    @property
    def at(self) -> datetime | None:
        """When it happened: by the store's clock where the store says, else as claimed."""
        if self.stored_at is not None:
            return self.stored_at
        return self.event.at if self.event else time_of_id(_stem(self.key))

    def to_json(self) -> dict[str, object]:
        """The row as ``fdcore audit --json`` prints it, one JSON object a line."""
        event = self.event
        at = self.at
        return {
            "id": event.id if event else _stem(self.key),
            "at": format_time(at) if at else None,
            "action": event.action if event else None,
            "subject": event.subject if event else None,
            "request": event.request if event else None,
            "actor": event.actor if event else None,
            "via": event.via if event else None,
            "process": event.process if event else None,
            "outcome": event.outcome if event else None,
            "detail": event.detail if event else None,
            "claimed_at": format_time(event.at) if event else None,
            "trusted": self.trusted,
            "problems": list(self.problems),
        }


@attrs.frozen
class AuditPage:
    """What one read of the trail found: rows oldest first, and whether older ones were left."""

    rows: list[AuditRow]
    left_off: bool = False


class AuditLog:
    """Reads ``audit/``: one listing a call, each file read once while its version stays (an
    event is never changed: a replaced file is read again, and judged again)."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        self._read: dict[str, tuple[str | None, AuditRow]] = {}

    def read(
        self,
        *,
        since: datetime | None = None,
        request: str | None = None,
        limit: int | None = None,
        archived: bool = False,
    ) -> AuditPage:
        """The events at or after ``since`` (by the time in their names), about ``request`` if
        given, the newest ``limit`` of them (default all), oldest first; with ``archived`` (which
        needs ``since``) those retention archived too, one listing per day since then. Raises
        StorageUnavailable if a folder cannot be listed."""
        prefixes = [AUDIT]
        if archived:
            if since is None:
                raise ValueError("archived events are read by day: give since")
            day, today = since.astimezone(timezone.utc).date(), datetime.now(timezone.utc).date()
            while day <= today and len(prefixes) <= MAX_ARCHIVE_DAYS:
                prefixes.append(f"archive/{day:%Y/%m/%d}/{AUDIT}")
                day += timedelta(days=1)
        found = [entry for prefix in prefixes for entry in self._listing(prefix)]
        listed = sorted(found, key=lambda entry: _stem(entry[0]), reverse=True)
        rows: list[AuditRow] = []
        left_off = False
        for key, etag, modified in listed:
            at = time_of_id(_stem(key))
            if since is not None and at is not None and at < since:
                continue
            if limit is not None and len(rows) >= limit:
                left_off = True
                break
            row = self._row(key, etag, modified)
            if request is None or (row.event is not None and row.event.request == request):
                rows.append(row)
        present = {key for key, _, _ in listed}
        self._read = {key: found for key, found in self._read.items() if key in present}
        return AuditPage(rows[::-1], left_off)

    def _listing(self, prefix: str) -> Iterator[tuple[str, str | None, datetime | None]]:
        storage = self.mailbox.storage
        versions = getattr(storage, "list_versions", None)
        if versions is not None:
            entries: Iterator[tuple[str, str | None, datetime | None]] = (
                (item.key, item.etag, item.modified) for item in versions(prefix)
            )
        else:
            entries = ((key, None, None) for key in storage.list(prefix))
        for count, entry in enumerate(entries, start=1):
            if count > MAX_LISTED:
                self.mailbox.problems.report(prefix, f"{prefix}: over {MAX_LISTED} files; not read")
                return
            yield entry

    def _row(self, key: str, etag: str | None, modified: datetime | None) -> AuditRow:
        known = self._read.get(key)
        if known is not None and etag is not None and known[0] == etag:
            return known[1]
        row = self._judge(key, modified)
        self._read[key] = (etag, row)
        return row

    def _judge(self, key: str, stored_at: datetime | None) -> AuditRow:
        stem = _stem(key)
        if "/" in key.rpartition(AUDIT)[2] or not key.endswith(".json") or not is_valid_id(stem):
            return AuditRow(key, None, stored_at, (f"{key}: not an audit file name",))
        try:
            blob = read_mailbox_file(self.mailbox.storage, key, _bound(self.mailbox))
            if blob is None:
                return AuditRow(key, None, stored_at, (f"{key}: gone while read",))
            event = decode(AuditEvent, blob.data, key, _bound(self.mailbox))
        except MailboxFileError as exc:
            return AuditRow(key, None, stored_at, (str(exc),))
        return AuditRow(key, event, stored_at, tuple(_problems(key, event, stored_at)))


def _problems(key: str, event: AuditEvent, stored_at: datetime | None) -> Iterator[str]:
    """What makes an event untrustworthy (each a reason shown beside it)."""
    if event.id != _stem(key):
        yield f"its id {event.id!r} is not its file name"
    named = time_of_id(_stem(key))
    if named is None or abs(named - event.at) > timedelta(seconds=1):
        yield "the time in its name is not the time it claims"
    if stored_at is not None and abs(stored_at - event.at) > CLOCK_TOLERANCE:
        claimed, stored = format_time(event.at), format_time(stored_at)
        yield f"it claims {claimed} but the store wrote it at {stored}"
    if event.action not in AUDIT_ACTIONS:
        yield f"unknown action {event.action!r}"
    if event.via not in AUDIT_ORIGINS:
        yield f"unknown origin {event.via!r}"
    elif event.via == "agent" and not is_valid_id(event.actor):
        yield f"an agent event whose actor {event.actor!r} is no agent name"


@attrs.frozen
class Aged:
    """What :func:`archive_old_events` did: events moved, and when the next may be due."""

    moved: int
    next_due: datetime  # no live event is older than keep before this time


def archive_old_events(
    mailbox: Mailbox, now: datetime, keep: float, archive: bool, limit: int
) -> Aged:
    """Move (``archive``) or delete up to ``limit`` events older than ``keep`` seconds (by the
    time in their names, oldest first) to ``archive/YYYY/MM/DD/audit/``. A file that cannot be
    moved is reported and left. One listing of ``audit/``: a caller that keeps ``next_due``
    lists it again only then (events written later are younger)."""
    moved = 0
    span = timedelta(seconds=keep)
    cutoff = now - span
    for key in sorted(mailbox.storage.list(AUDIT)):
        at = time_of_id(_stem(key))
        if at is None or "/" in key[len(AUDIT) :]:
            continue  # no time to age it by: left, and shown flagged
        if at >= cutoff or moved >= limit:
            return Aged(moved, min(at, now) + span)  # sorted by time: the rest are younger
        try:
            move_file(mailbox, key, archived_key(archive_day(at), key), archive, _bound(mailbox))
            moved += 1
        except StorageUnavailable:
            raise
        except FdcoreError as exc:  # malformed, over the bound, changed meanwhile
            mailbox.problems.report(key, f"{key}: not archived: {exc}")
    return Aged(moved, now + span)


def _stem(key: str) -> str:
    return key.rpartition("/")[2].removesuffix(".json")
