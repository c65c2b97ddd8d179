"""Retention: finished requests older than ``[retention] keep`` leave the live folders.

Once per ``every``, across the environment, whichever agent wins the retention lease (the
agent's own lease provider, under the reserved table name :data:`RETENTION_LEASE`) lists
``status/`` and, over its next polls, ``batch`` requests a poll, moves each finished one old
enough to the archive (or deletes it) with :func:`fdcore.mailbox.archive.archive_files`.

What is never removed (:func:`reason_to_keep`): a request that is not final; one finished less
than ``keep`` ago; one with a deadline (every schedule slot has one) not yet past by
``grace_seconds``, so no agent can create the slot's request again; a schedule's request without
a deadline; and one an open incident is about (its incident would read as resolved).
docs/retention.md tells why the move is safe at every step.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TypeVar

import attrs

from fdcore.abc import HeldLease, TableLeases
from fdcore.agent.skew import ClockSkew
from fdcore.clock import Clock
from fdcore.contract.layout import archive_day
from fdcore.contract.models import IncidentState, Request, State, Status
from fdcore.errors import ArchiveConflict, FdcoreError, MailboxFileError, StorageUnavailable
from fdcore.mailbox import audit
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archive_entry, archive_files
from fdcore.mailbox.audit import archive_old_events
from fdcore.mailbox.index import Entry, MailboxIndex
from fdcore.settings.agent_toml import MAX_RETENTION_BATCH, RetentionConfig

T = TypeVar("T")

log = logging.getLogger("fdcore.retention")

#: The lease that makes one agent run retention per interval. Reserved: no table may use it.
RETENTION_LEASE = "fdcore-retention"

_INCIDENT_KINDS_ABOUT_REQUESTS = ("request_failed", "slot_missed")


@attrs.define
class Tally:
    """What a retention run (or one batch of it) did, or would do with ``dry_run``."""

    examined: int = 0
    moved: list[str] = attrs.field(factory=list)  # archived, or deleted when archive = false
    kept: dict[str, int] = attrs.field(factory=dict)  # reason -> requests left live
    files: int = 0  # live files removed
    problems: list[str] = attrs.field(factory=list)
    events: int = 0  # audit events older than keep, archived (or deleted)

    def keep(self, reason: str) -> None:
        self.kept[reason] = self.kept.get(reason, 0) + 1

    def add(self, other: Tally) -> None:
        self.examined += other.examined
        self.moved.extend(other.moved)
        for reason, count in other.kept.items():
            self.kept[reason] = self.kept.get(reason, 0) + count
        self.files += other.files
        self.problems.extend(other.problems)
        self.events += other.events


def protected_requests(mailbox: Mailbox) -> set[str] | None:
    """Subjects of open incidents about requests (request ids, ``<schedule>.<slot>``); None if
    the incident document cannot be read (then no failed or expired request is removed)."""
    try:
        found = mailbox.incidents()
    except MailboxFileError as exc:
        mailbox.problems.report("incidents/incidents.json", str(exc))
        return None
    if found is None:
        return set()
    return {
        incident.subject
        for incident in found.value.open
        if incident.kind in _INCIDENT_KINDS_ABOUT_REQUESTS
        and incident.state is not IncidentState.RESOLVED
        and incident.subject is not None
    }


def reason_to_keep(
    status: Status,
    request: Request | None,
    now: datetime,
    settings: RetentionConfig,
    grace_seconds: float,
    protected: set[str] | None,
) -> str | None:
    """Why this request must stay live; None if retention may remove it."""
    if not status.state.final:
        return "not final"
    if now - status.updated_at < timedelta(seconds=settings.keep):
        return "younger than keep"
    if request is not None:
        reason = _reason_in_request(request, now, grace_seconds, protected)
        if reason is not None:
            return reason
    if protected is None:
        if status.state in (State.FAILED, State.EXPIRED):
            return "incidents unreadable"
    elif status.request in protected:
        return "open incident"
    return None


def _reason_in_request(
    request: Request, now: datetime, grace_seconds: float, protected: set[str] | None
) -> str | None:
    """What in the request keeps it live: its schedule slot's deadline, or an open incident
    about its slot."""
    if request.deadline is not None:
        if now <= request.deadline + timedelta(seconds=grace_seconds):
            return "deadline not past"  # a slot's request could be created again
    elif request.schedule is not None:
        return "schedule request without deadline"
    slot = request.schedule
    if protected is not None and slot is not None and f"{slot.id}.{slot.slot}" in protected:
        return "open incident"
    return None


def retire(
    mailbox: Mailbox,
    request_id: str,
    now: datetime,
    settings: RetentionConfig,
    grace_seconds: float,
    protected: set[str] | None,
    *,
    dry_run: bool = False,
    index: MailboxIndex | None = None,
    actor: str = "retention",
    via: str = "agent",
) -> Tally:
    """Look at one request and move (or delete) it if nothing keeps it. Never raises for a
    malformed file or a conflict: they are counted in the tally. Each move is one event of the
    audit trail, by ``actor`` (the agent, or the operator of ``fdcore retention run``).

    With ``index`` (the agent's), its status and request are read through it: a final status and
    a request, which never change, were most likely read already. What it knows can only be
    older than the file, and only a final status (which no longer changes) lets a request go.
    """
    tally = Tally(examined=1)
    try:
        status, request = _read(mailbox, index, request_id)
        if status is None:
            tally.keep("gone")
            return tally
        reason = reason_to_keep(status, request, now, settings, grace_seconds, protected)
        if reason is not None:
            tally.keep(reason)
            return tally
        if not dry_run:
            # A move cut short left its index entry: finish it in the same day folder.
            entry = archive_entry(mailbox, request_id) if settings.archive else None
            day = entry.day if entry is not None else archive_day(status.updated_at)
            tally.files = archive_files(mailbox, request_id, day, settings.archive, now)
            audit.record(
                mailbox,
                "archive" if settings.archive else "delete",
                request_id,
                actor=actor,
                via=via,
                at=now,
                request=request_id,
                detail=f"{tally.files} live files"
                + (f" moved to archive/{day}/" if settings.archive else " deleted"),
            )
        tally.moved.append(request_id)
    except (MailboxFileError, ArchiveConflict) as exc:
        # Keyed by the file, as every reader reports it: each bad file is reported once.
        key = exc.path if isinstance(exc, MailboxFileError) else exc.key
        mailbox.problems.report(key, str(exc))
        tally.problems.append(str(exc))
        tally.keep("problem")
    return tally


def _read(
    mailbox: Mailbox, index: MailboxIndex | None, request_id: str
) -> tuple[Status | None, Request | None]:
    """The request's status (None if gone) and request; MailboxFileError for a bad file."""
    if index is None:
        found = mailbox.status(request_id)
        if found is None:
            return None, None
        request = mailbox.request(request_id)
        return found.value, request.value if request is not None else None
    status = _known(index.statuses.get(request_id))
    if status is None:
        return None, None
    return status, _known(index.requests.get(request_id))


def _known(entry: Entry[T]) -> T | None:
    if entry.problem is not None:
        raise MailboxFileError(entry.key, None, entry.problem.removeprefix(f"{entry.key}: "))
    return entry.value


def run_retention(
    mailbox: Mailbox,
    now: datetime,
    settings: RetentionConfig,
    grace_seconds: float,
    *,
    dry_run: bool = False,
    actor: str = "retention",
    via: str = "agent",
) -> Tally:
    """A whole run at once (``fdcore retention run``): every status, in id order; then the
    audit events older than ``keep``."""
    protected = protected_requests(mailbox)
    total = Tally()
    for request_id in sorted(mailbox.status_ids()):
        total.add(
            retire(
                mailbox,
                request_id,
                now,
                settings,
                grace_seconds,
                protected,
                dry_run=dry_run,
                actor=actor,
                via=via,
            )
        )
    if not dry_run:
        aged = archive_old_events(
            mailbox, now, settings.keep, settings.archive, MAX_RETENTION_BATCH
        )
        total.events = aged.moved
    return total


class Retention:
    """The agent's part: win the retention lease once per interval, then a batch per poll."""

    def __init__(
        self,
        settings: RetentionConfig,
        agent: str,
        mailbox: Mailbox,
        leases: TableLeases,
        grace_seconds: float,
        clock: Clock,
        *,
        warm_up: float,
        budget: float,
        skew: ClockSkew,
        index: MailboxIndex | None = None,
    ) -> None:
        self.settings = settings
        self.index = index  # the agent's: what it read already is not read again
        self.clock = clock
        self.warm_up = warm_up  # seconds after its first poll before an agent tries
        # Seconds of one poll a batch may take: on a slow store (a remote tenant, ~15 store
        # operations a request) a whole batch could outlast stale_after.
        self.budget = budget
        self.agent = agent
        self.mailbox = mailbox
        self.leases = leases
        self.grace_seconds = grace_seconds
        self._next_try: datetime | None = None
        self._held: HeldLease | None = None
        self._queue: list[str] = []  # status ids this run has yet to look at
        self._protected: set[str] | None = set()
        self.done = Tally()  # everything this agent's runs did (the simulator reports it)
        self.skew = skew  # this agent's clock against the store's
        self._audit_due: datetime | None = None  # when an audit event may be older than keep

    def step(self, now: datetime) -> None:
        """Called every poll: start a run when one is due, else go on with the current one.

        Only StorageUnavailable leaves it (the poll reports an outage once); any other error,
        a malformed lease file say, is reported and the run tried again next interval.
        """
        if not self.settings.enabled:
            return
        try:
            self._step(now)
        except StorageUnavailable:
            raise
        except FdcoreError as exc:
            self.mailbox.problems.report(RETENTION_LEASE, f"retention: {exc}")
            self._finish(str(exc))
            self._next_try = now + timedelta(seconds=self.settings.every)

    def _step(self, now: datetime) -> None:
        if self._held is None and not self._start(now):
            return
        assert self._held is not None
        if now >= self._held.lease.expires_at:
            self._finish("its lease ran out")  # the next run, anyone's, picks up the rest
            return
        batch = Tally()
        while self._queue and batch.examined < self.settings.batch:
            if batch.examined and self._over(now):
                break  # one request a poll at least, however slow the store
            request_id = self._queue.pop()
            batch.add(
                retire(
                    self.mailbox,
                    request_id,
                    now,
                    self.settings,
                    self.grace_seconds,
                    self._protected,
                    index=self.index,
                    actor=self.agent,
                )
            )
        self.done.add(batch)
        if batch.moved:
            log.info(
                "%s: retention %s %d requests",
                self.agent,
                "archived" if self.settings.archive else "deleted",
                len(batch.moved),
            )
        if not self._queue:
            self._finish("done")

    def _over(self, started: datetime) -> bool:
        """Whether this poll (begun at ``started``) has run for the budget already."""
        return (self.clock.now() - started).total_seconds() >= self.budget

    def _start(self, now: datetime) -> bool:
        if self._next_try is None:
            # Not at start-up: a (re)started agent first resumes its work and sweeps; and a
            # fleet restarted at once does not race for the lease in its first poll.
            self._next_try = now + timedelta(seconds=self.warm_up)
        if now < self._next_try:
            return False
        if self.skew.refuses_takeover:
            # A clock this far ahead could judge a slot's deadline past while an agent with
            # the right time may still create its request (ClockSkew warns).
            return False
        held = self.leases.acquire(
            RETENTION_LEASE,
            self.agent,
            "retention",
            1,
            self.settings.every,
            now,
            grace=self.grace_seconds,  # as a table lease: a clock this far off waits
        )
        if held is None:
            # Another agent runs it this interval: look again when its lease runs out.
            current = self.leases.current(RETENTION_LEASE)
            if current is not None and current.expires_at > now:
                self._next_try = current.expires_at + timedelta(seconds=self.grace_seconds)
            else:
                self._next_try = now + timedelta(seconds=self.settings.every)
            return False
        protected = protected_requests(self.mailbox)
        # Popped from the end: looked at in id order. Listed before the run counts as started,
        # so a store error here leaves the run to the next poll.
        listed = self.index.statuses.list() if self.index else self.mailbox.status_ids()
        self._queue = sorted(listed, reverse=True)
        self._protected = protected
        self._held = held
        self._next_try = held.lease.expires_at
        self._age_audit_events(now)
        return True

    def _age_audit_events(self, now: datetime) -> None:
        """Archive the audit events older than keep: listed only when one may be that old (the
        oldest seen plus keep), so a run pays for ``audit/`` once per keep, not every time."""
        if self._audit_due is not None and now < self._audit_due:
            return
        settings = self.settings
        aged = archive_old_events(
            self.mailbox, now, settings.keep, settings.archive, settings.batch
        )
        self._audit_due = aged.next_due
        self.done.events += aged.moved

    def _finish(self, why: str) -> None:
        # The lease is not released: until it runs out it tells other agents a run took place.
        log.debug("%s: retention run ends: %s", self.agent, why)
        self._held = None
        self._queue = []
