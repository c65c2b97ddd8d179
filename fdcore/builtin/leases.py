"""The default lease provider, ``mailbox``: one ``leases/<table>.json`` per table.

Acquiring creates the file (generation 1) or replaces an expired or released one with
``If-Match``, raising the generation; of agents racing for one table exactly one wins.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any

import attrs

from fdcore.abc import HeldLease, Storage
from fdcore.contract.codec import decode, encode
from fdcore.contract.layout import lease_key
from fdcore.contract.models import Lease
from fdcore.errors import AlreadyExists, LeaseLost, NotFound, PreconditionFailed


class MailboxLeases:
    """:class:`fdcore.abc.TableLeases` kept as files in the environment's storage."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def _read(self, table: str) -> tuple[Lease, str] | None:
        key = lease_key(table)
        blob = self.storage.read(key)
        if blob is None:
            return None
        return decode(Lease, blob.data, key), blob.etag

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
        found = self._read(table)
        generation = 1
        if found is not None:
            old = found[0]
            # A live lease blocks, except the one this agent took for this same request: only
            # one live process may carry a name, so that holder was an earlier, dead process.
            own = old.holder == holder and old.request == request
            live = old.expires_at + timedelta(seconds=grace) > now
            if not old.released and live and not own:
                return None
            generation = old.generation + 1
        lease = Lease(
            table=table,
            holder=holder,
            request=request,
            attempt=attempt,
            acquired_at=now,
            expires_at=now + timedelta(seconds=ttl),
            generation=generation,
        )
        if found is not None:
            lease.extra = dict(found[0].extra)
        try:
            if found is None:
                token = self.storage.create(lease_key(table), encode(lease))
            else:
                token = self.storage.replace(lease_key(table), encode(lease), found[1])
        except (AlreadyExists, PreconditionFailed, NotFound):
            return None  # another agent won this race; try again next poll
        return HeldLease(lease, token)

    def renew(self, held: HeldLease, ttl: float, now: datetime) -> HeldLease:
        lease = attrs.evolve(held.lease, expires_at=now + timedelta(seconds=ttl))
        try:
            token = self.storage.replace(lease_key(lease.table), encode(lease), held.token)
        except (PreconditionFailed, NotFound):
            raise LeaseLost(f"lease on table {lease.table} is no longer held") from None
        return HeldLease(lease, token)

    def release(self, held: HeldLease, now: datetime) -> None:
        lease = attrs.evolve(held.lease, released=True, expires_at=now)
        # A lease already taken by someone else leaves nothing of ours to give up.
        with contextlib.suppress(PreconditionFailed, NotFound):
            self.storage.replace(lease_key(lease.table), encode(lease), held.token)

    def current(self, table: str) -> Lease | None:
        found = self._read(table)
        return found[0] if found else None


class MailboxLeaseProvider:
    name = "mailbox"

    def open(self, storage: Storage, options: dict[str, Any]) -> MailboxLeases:
        return MailboxLeases(storage)
