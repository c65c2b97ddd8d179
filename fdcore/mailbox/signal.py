"""The change signal: one small key, ``signal/changes.json``, that tells a reader cheaply
whether new work may have arrived since it last looked.

A writer of new work (a submission, a retry, a schedule's slot) **deletes** the key after its
write (:func:`announce`). A reader (:class:`ChangeSignal`) reads it before it lists: the same
version as last time means nothing was announced since its last listing; a missing key (or a
new version) means something may have been, so it lists, after making the key again (with
content of its own, so its version is new) for the next announcement to show. A read and a
delete are the cheapest operations a store bills (S3 charges nothing for a DELETE).

The signal only ever makes a reader look sooner: an announcement lost (a writer that died
between its write and the delete, a store error, a writer of an earlier release that knows
nothing of the signal) is found at the reader's next full listing, which it makes on its own
cadence whatever the signal says (docs/operations.md, "What a fleet costs").
"""

from __future__ import annotations

import contextlib
import logging
import secrets

from fdcore.abc import read_mailbox_file
from fdcore.contract.layout import SIGNAL
from fdcore.errors import AlreadyExists, MailboxFileError, NotFound, StorageUnavailable
from fdcore.mailbox.access import Mailbox

log = logging.getLogger("fdcore.mailbox")

#: The signal's content is a token of this many bytes (hex): small, and new at every write.
_MAX_BYTES = 256
#: A reader with nothing open lists at least this often (seconds), whatever the signal says.
FULL_LOOK_SECONDS = 300.0


def announce(mailbox: Mailbox) -> None:
    """Say new work was written: delete the signal. Never raises for the store: an announcement
    lost delays a reader to its next full listing, no more."""
    try:
        mailbox.storage.delete(SIGNAL)
    except NotFound:
        pass  # already announced, and no reader looked since
    except StorageUnavailable as exc:
        log.debug("could not announce new work (found at the next full listing): %s", exc)


class ChangeSignal:
    """One reader's view of the signal: :meth:`moved` is one read while nothing changed.

    An agent makes the key again when it finds it gone (``make``); a reader that only reads
    (a command, the monitor, possibly with read-only credentials) never writes: it lists while
    the key is gone, until an agent made it again (at its next poll)."""

    def __init__(self, mailbox: Mailbox, *, make: bool = True) -> None:
        self.mailbox = mailbox
        self.make = make
        self.etag: str | None = None  # the version seen (None: none, or unknown)
        self._read: str | None = None  # the version the last call read (or made)

    def seen(self) -> None:
        """The listing the last :meth:`moved` called for landed: what was announced before
        that read is in it. Until then the signal keeps saying it moved (a listing cut short
        by a store error must not hide what it would have found)."""
        self.etag = self._read

    def moved(self) -> bool:
        """Whether something may have been announced since the version seen: True the first
        time, when the signal is gone or new, or unreadable. Call it before listing, and
        :meth:`seen` once the listing landed."""
        storage = self.mailbox.storage
        try:
            blob = read_mailbox_file(storage, SIGNAL, _MAX_BYTES)
        except MailboxFileError as exc:
            # Not a small file (a folder, say): no signal here; the reader lists every time.
            self.mailbox.problems.report(SIGNAL, str(exc))
            self._read = None
            return True
        if blob is not None:
            self._read = blob.etag
            return blob.etag != self.etag
        # Gone (announced) or never made: make it, so that the next announcement shows.
        self._read = None
        if not self.make:
            return True
        # AlreadyExists: another reader made it after our read: read at the next call.
        with contextlib.suppress(AlreadyExists):
            self._read = storage.create(SIGNAL, secrets.token_hex(8).encode())
        return True


class QuietLook:
    """For a reader that lists the mailbox over and over (an agent's poll, ``fdcore queue
    --watch``, ``Environment.changes()``): whether, knowing of no open request, it may skip a
    listing. It may while the signal is as the last listing saw it and that listing is younger
    than :data:`FULL_LOOK_SECONDS`. Times are seconds on any clock that only moves forward
    (one that went back counts as due)."""

    def __init__(self, mailbox: Mailbox, *, make: bool = True) -> None:
        self.signal = ChangeSignal(mailbox, make=make)
        self._listed_at: float | None = None

    def may_skip(self, now: float) -> bool:
        """One read of the signal (call it only when nothing is open, before listing)."""
        moved = self.signal.moved()
        last = self._listed_at
        due = last is None or not last <= now < last + FULL_LOOK_SECONDS
        return not (moved or due)

    def listed(self, now: float) -> None:
        """The reader's listing (started at ``now``) landed."""
        self.signal.seen()
        self._listed_at = now
