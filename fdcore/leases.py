"""The lease provider extension point: one writer per table, with a fencing token.

A lease names its holder, the request and attempt it serves, when it runs out, and a
``generation`` that rises on every acquisition. The generation is the fencing token handed to the
table writer: a store that checks it rejects a writer whose token is older than the lease's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from fdcore.models import Lease
from fdcore.storage import Storage


class LeaseLost(Exception):
    """The lease is no longer held by the caller (expired and taken, or replaced)."""


@attrs.frozen
class HeldLease:
    """A lease the caller holds, with the provider's opaque version token for renewal."""

    lease: Lease
    token: str


@runtime_checkable
class TableLeases(Protocol):
    """An environment's table leases, opened by a :class:`LeaseProvider`."""

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
        """Take ``table``'s lease if it is free, released or expired; None if another holds it.

        Another holder's lease counts as expired only ``grace`` seconds after its
        ``expires_at``: the holder wrote that time by its own clock, which may run behind ours.
        Every acquisition raises the generation by one, whoever held it before.
        """

    def renew(self, held: HeldLease, ttl: float, now: datetime) -> HeldLease:
        """Extend the lease to ``now + ttl``; raise :class:`LeaseLost` if it is no longer ours."""

    def release(self, held: HeldLease, now: datetime) -> None:
        """Give the lease up (keeping its generation); a lease already lost is left alone."""

    def current(self, table: str) -> Lease | None:
        """The table's lease as stored, or None if it never had one."""


@runtime_checkable
class LeaseProvider(Protocol):
    """A kind of lease store (``mailbox``: lease files next to the requests)."""

    name: str

    def open(self, storage: Storage, options: dict[str, Any]) -> TableLeases:
        """Table leases for the environment in ``storage``."""
