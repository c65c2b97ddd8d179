"""Honouring operators' cancels (``cancels/<id>.json``, :mod:`fdcore.mailbox.cancel`).

Each poll lists ``cancels/`` once, and only when the answer matters (the agent holds requests,
or found unclaimed ones): one listing serves every held request, so the cost does not grow with
what the agent holds. Reactions between polls reuse the poll's listing.

A held request that is cancelled stops at once: its table run is cancelled (the command runner's
process group gets SIGTERM, then SIGKILL after a grace), the status ends ``cancelled`` naming
who cancelled it, the table is logged ``cancelled`` in the run log, and its lease is released.
No further table of it starts. A cancelled request nobody holds is never claimed: discovery
ends it instead (:func:`fdcore.mailbox.cancel.end_unheld`). A malformed cancel file (bad JSON, or
about another request) is no cancel: it is reported once and the request runs.
"""

from __future__ import annotations

import logging
from datetime import datetime

from fdcore.abc import TableResult
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.tables import Tables
from fdcore.agent.work import Holdings, Work
from fdcore.contract.layout import cancel_key
from fdcore.contract.models import Cancel, Outcome
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.cancel import end_unheld

log = logging.getLogger("fdcore.agent")


class Cancels:
    """The cancelled requests this agent must stop or must not claim."""

    def __init__(
        self, mailbox: Mailbox, holdings: Holdings, status_changes: StatusChanges, tables: Tables
    ) -> None:
        self.mailbox = mailbox
        self.holdings = holdings
        self.status_changes = status_changes
        self.tables = tables
        self._ids: frozenset[str] | None = None  # None: to be listed when next asked
        self.listings = 0  # how many times ``cancels/`` was listed (the cost of honouring them)

    def new_poll(self) -> None:
        """A poll begins: the next question lists ``cancels/`` again (once for the whole poll).
        Reactions between polls use the poll's listing: a cancel is honoured by the next poll."""
        self._ids = None

    def ids(self) -> frozenset[str]:
        """The cancelled requests' ids, as listed at most once since the poll began."""
        if self._ids is None:
            self._ids = frozenset(self.mailbox.cancel_ids())
            self.listings += 1
        return self._ids

    def read(self, request_id: str) -> Cancel | None:
        """A cancel, None if unreadable or not about that request (reported once)."""
        found = self.mailbox.read_or_report(Cancel, cancel_key(request_id))
        return found.value if found is not None else None

    def stop_held(self, now: datetime) -> None:
        """Stop every held request an operator cancelled."""
        if not self.holdings.work:
            return
        cancelled = self.ids()
        for work in list(self.holdings.work.values()):
            cancel = self.read(work.id) if work.id in cancelled else None
            if cancel is not None:
                self._stop(work, cancel, now)
            else:
                work.cancelled = False  # gone or unreadable: no cancel, so the request runs

    def end_unclaimed(self, request_id: str, now: datetime) -> bool:
        """True if the unclaimed request was cancelled: it ends so, and is not to be claimed."""
        if request_id not in self.ids():
            return False
        cancel = self.read(request_id)
        if cancel is None:
            # Gone, or malformed (reported once): no cancel, so the request runs, as every good
            # request does whatever else the mailbox holds; ``fdcore queue`` says so.
            return False
        end_unheld(self.mailbox, cancel, now)
        self.holdings.final.add(request_id)
        return True

    def _stop(self, work: Work, cancel: Cancel, now: datetime) -> None:
        # A table runs (or ran: an earlier stop was cut short by a store error) under its lease.
        running = work.run is not None or work.lease is not None
        work.cancelled = True  # from here on no table of it starts, whatever the writes meet
        # Blocks for at most the runner's grace: SIGTERM, then SIGKILL to what is left.
        work.cancel_run()
        work.result = None  # a table that ended as the cancel came is not recorded done
        attempt = work.status.attempt
        log.info("%s: request %s: %s; stopping it", self.holdings.agent, work.id, cancel.describe())
        if not self.status_changes.cancel(work, cancel.describe(), now):
            return  # not ours any more: dropped, its lease let go
        if work.lease is not None:
            if running:
                stopped = TableResult(False, cancel.describe())
                ended = self.tables.clock.now()  # after the run's grace
                self.tables.write_run_record(
                    work, work.lease, attempt, Outcome.CANCELLED, stopped, ended
                )
            self.tables.release_lease(work, now)
