"""The default lease provider, ``mailbox``: one ``leases/<table>.json`` per table.

Acquiring creates the file (generation 1) or replaces an expired or released one with
``If-Match``, raising the generation; of agents racing for one table exactly one wins.

Every acquisition writes the same lease to ``fences/<table>.json`` first, also with
``If-Match``, but set to run two lease terms; a renewal writes the lease file alone while the
fence has a full term left (the fence carries the generation, which a renewal keeps), else both
again, as it does when the lease file is gone; a release writes the lease file alone, and frees
the generation it names in both copies. While a lease file of the fence's generation is there,
its expiry rules; the fence's longer one counts only without it. A request's last table is not
released at all: its final status, written by the holder's own attempt, frees the lease (an
acquirer blocked by a live lease reads the status of the lease's request, from the archive once
retention moved it). A lease file lost or
deleted by hand (or a fence file) then changes nothing: the lease is whichever of the two has
the higher generation, a live holder of a generation no copy released blocks others, and
generations (the fencing tokens) never repeat or go backwards. Only losing both files starts a
table's generations again at 1.
"""

from __future__ import annotations

import contextlib
import math
from datetime import datetime, timedelta
from typing import Any

import attrs

from fdcore.abc import HeldLease, Storage
from fdcore.contract.codec import MAX_FILE_BYTES
from fdcore.contract.layout import fence_key, lease_key
from fdcore.contract.models import Lease, Outcome, Status
from fdcore.errors import (
    AlreadyExists,
    LeaseLost,
    MailboxFileError,
    NotFound,
    PreconditionFailed,
)
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archived_status

_Found = tuple[Lease, str] | None  # a lease as stored, with its etag

#: The fence is written to last this many lease terms (see MailboxLeases._write_both).
FENCE_TERMS = 2


class MailboxLeases:
    """:class:`fdcore.abc.TableLeases` kept as files in the environment's storage."""

    #: A request's final status frees its holder's lease (:class:`fdcore.abc.FinishReleasesLease`).
    finish_releases = True

    def __init__(self, storage: Storage, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.storage = storage
        # Lease and status files are read and written as every mailbox file is: within the
        # operator's bound, through the codec.
        self.mailbox = Mailbox(storage, max_file_bytes=max_file_bytes)
        # For each table whose last acquire a live lease refused: when that lease runs out
        # (:class:`fdcore.abc.LeaseWaits`), so the waiting agent wakes then, not at a poll.
        self._free_at: dict[str, datetime | None] = {}

    def free_at(self, table: str) -> datetime | None:
        return self._free_at.get(table)

    def _read(self, key: str) -> _Found:
        found = self.mailbox.read(Lease, key)
        return None if found is None else (found.value, found.etag)

    def _read_both(self, table: str) -> tuple[_Found, _Found]:
        """The fence, then the lease: read in the order they are written."""
        return self._read(fence_key(table)), self._read(lease_key(table))

    @staticmethod
    def _newest(fence: _Found, lease: _Found) -> Lease | None:
        """The table's lease: the copy with the higher generation; on a tie a released copy (a
        release writes the lease file alone), else the lease file (written last, and alone by
        most renewals)."""
        copies = [(found[0], key) for key, found in enumerate((fence, lease)) if found is not None]
        if not copies:
            return None
        newest = max(copies, key=lambda pair: (pair[0].generation, pair[0].released, pair[1]))
        return newest[0]

    def _write(self, key: str, lease: Lease, etag: str | None) -> str:
        if etag is None:
            return self.mailbox.create(key, lease)
        return self.mailbox.replace(key, lease, etag)

    def _write_both(
        self,
        lease: Lease,
        ttl: float,
        fence_etag: str | None,
        lease_etag: str | None,
        renewal: bool = False,
    ) -> str:
        """Fence first, then lease, each create-if-absent or ``If-Match`` (a renewal writes a
        copy that is gone again); the held token.

        The fence is written to last ``FENCE_TERMS`` lease terms: while the lease file is there
        its own expiry rules (see acquire), and if it is deleted the fence holds the table until
        the holder's next renewal has written both again.
        """
        fenced_until = lease.expires_at + timedelta(seconds=ttl * (FENCE_TERMS - 1))
        fence_copy = attrs.evolve(lease, expires_at=fenced_until)
        write = self._rewrite if renewal else self._write
        fence = write(fence_key(lease.table), fence_copy, fence_etag)
        written = write(lease_key(lease.table), lease, lease_etag)
        return _token(written, fence, fenced_until)

    def acquire(
        self,
        table: str,
        holder: str,
        request: str,
        attempt: int,
        ttl: float,
        now: datetime,
        grace: float = 0.0,
    ) -> HeldLease | None:
        fence, stored = self._read_both(table)
        old = self._newest(fence, stored)
        copies = [found[0] for found in (fence, stored) if found is not None]
        # A release is written to the lease file alone (one write, not two): it frees the
        # generation it names, and the fence's copy of that generation with it.
        released = max((c.generation for c in copies if c.released), default=0)
        finished: dict[tuple[str, str, int], bool] = {}  # both copies name one attempt: read once
        self._free_at.pop(table, None)
        for copy in copies:
            # A live lease blocks, except the one this agent took for this same request: only
            # one live process may carry a name, so that holder was an earlier, dead process.
            # Either copy blocks: an acquisition cut short between the two writes leaves the
            # lease as held as its more careful copy says. The fence's longer time counts only
            # while no lease file of its generation is there (deleted by hand, or not written).
            own = copy.holder == holder and copy.request == request
            expires_at = copy.expires_at
            if stored is not None and stored[0].generation == copy.generation:
                expires_at = stored[0].expires_at
            # An infinite grace: the caller cannot trust its clock to judge (ClockSkew).
            live = math.isinf(grace) or expires_at + timedelta(seconds=grace) > now
            if copy.generation > released and live and not own:
                their = (copy.request, copy.holder, copy.attempt)
                if their not in finished:
                    finished[their] = self._finished(copy)
                if not finished[their]:
                    if not math.isinf(grace):
                        self._free_at[table] = expires_at + timedelta(seconds=grace)
                    return None
        generation = 1 if old is None else old.generation + 1
        lease = Lease(
            table=table,
            holder=holder,
            request=request,
            attempt=attempt,
            acquired_at=now,
            expires_at=now + timedelta(seconds=ttl),
            generation=generation,
        )
        if old is not None:
            lease.extra = dict(old.extra)
        try:
            token = self._write_both(lease, ttl, _etag(fence), _etag(stored))
        except (AlreadyExists, PreconditionFailed, NotFound):
            return None  # another agent won this race; try again next poll
        return HeldLease(lease, token)

    def _finished(self, lease: Lease) -> bool:
        """The lease's request is final in the holder's own attempt: the holder's table ended and
        was recorded, so the lease is as good as released (the finish frees it, one write less).

        Not when another agent failed the request past its attempts (``lost``): the holder may be
        paused with its table still running. An unreadable status frees nothing.
        """
        try:
            status = self._status(lease.request)
        except MailboxFileError:
            return False
        return (
            status is not None
            and status.state.final
            and status.agent == lease.holder
            and status.attempt == lease.attempt
            and bool(status.attempts)
            and status.attempts[-1].outcome in (Outcome.SUCCEEDED, Outcome.FAILED)
        )

    def _status(self, request: str) -> Status | None:
        """The request's status, live or, once retention moved it, archived: the move writes
        the index entry before it deletes the live status, so one of the two reads finds it."""
        found = self.mailbox.status(request)
        return found.value if found is not None else archived_status(self.mailbox, request)

    def renew(self, held: HeldLease, ttl: float, now: datetime) -> HeldLease:
        lease = attrs.evolve(held.lease, expires_at=now + timedelta(seconds=ttl))
        lease_etag, fence_etag, fenced_until = _parts(held.token)
        try:
            # The lease file alone while the fence, written to last two terms, still has one
            # full term to run (every other renewal): the fence carries the generation, which a
            # renewal keeps, and holds the table if the lease file is deleted, until the
            # holder's next renewal (due within half a term) writes both again.
            if lease_etag and fence_etag and fenced_until and fenced_until >= lease.expires_at:
                with contextlib.suppress(NotFound):
                    renewed = self._write(lease_key(lease.table), lease, lease_etag)
                    return HeldLease(lease, _token(renewed, fence_etag, fenced_until))
            # Both, fence first, as an acquisition writes them: the fence's time is running
            # low, the lease file is gone (deleted by hand), or the token predates fences. A
            # copy that changed was taken.
            token = self._write_both(lease, ttl, fence_etag, lease_etag, renewal=True)
        except (PreconditionFailed, AlreadyExists):
            raise LeaseLost(f"lease on table {lease.table} is no longer held") from None
        return HeldLease(lease, token)

    def _rewrite(self, key: str, lease: Lease, etag: str | None) -> str:
        try:
            return self._write(key, lease, etag)
        except NotFound:
            return self._write(key, lease, None)

    def release(self, held: HeldLease, now: datetime) -> None:
        lease = attrs.evolve(held.lease, released=True, expires_at=now)
        lease_etag, _, _ = _parts(held.token)
        # The lease file alone: a released copy frees its generation in both (see acquire), so
        # the fence keeps the generation without a write of its own. A lease already taken by
        # someone else leaves nothing of ours to give up.
        with contextlib.suppress(PreconditionFailed, NotFound, AlreadyExists):
            self._rewrite(lease_key(lease.table), lease, lease_etag)

    def current(self, table: str) -> Lease | None:
        return self._newest(*self._read_both(table))


def _etag(found: _Found) -> str | None:
    return found[1] if found is not None else None


def _token(lease_etag: str, fence_etag: str, fenced_until: datetime) -> str:
    """What a held lease carries: both copies' etags and the expiry the fence was written with."""
    return f"{lease_etag}\n{fence_etag}\n{fenced_until.isoformat()}"


def _parts(token: str) -> tuple[str | None, str | None, datetime | None]:
    """The lease's and the fence's etags and the fence's expiry from a held token (a token from
    before fences: the lease's etag alone; from before this expiry: both etags)."""
    lease, _, rest = token.partition("\n")
    fence, _, until = rest.partition("\n")
    try:
        fenced_until = datetime.fromisoformat(until) if until else None
    except ValueError:
        fenced_until = None
    return lease, fence or None, fenced_until


class MailboxLeaseProvider:
    name = "mailbox"

    def open(self, storage: Storage, options: dict[str, Any]) -> MailboxLeases:
        return MailboxLeases(storage, options.get("max_file_bytes", MAX_FILE_BYTES))
