"""Every write this agent makes to a request's status, ``status/<id>.json``.

A claim or an expiry creates the status (create-if-absent: only one agent's create lands),
through :func:`fdcore.mailbox.archive.create_status`, which withdraws a create that landed
after retention moved the request away (it is never claimed again). Every
later change (start, a table done, succeed, fail, cancel, hand back, take over) replaces it with
``If-Match`` on the etag this agent last read or wrote. A failed replace means another agent
holds the request now: this agent drops it and writes nothing more for it, unless the status it
finds is its own write whose answer was lost, which it builds on. :meth:`StatusChanges._replace`
is the one place that decides between the two.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable
from datetime import datetime

import attrs

from fdcore.agent.work import Holdings, Work, is_attempt_of, is_held_by
from fdcore.contract.layout import status_key
from fdcore.contract.models import Attempt, Outcome, Request, State, Status
from fdcore.errors import AlreadyExists, FileTooLarge, InvalidKey, NotFound, PreconditionFailed
from fdcore.mailbox import audit
from fdcore.mailbox.access import Mailbox, Versioned
from fdcore.mailbox.archive import create_status
from fdcore.settings.agent_toml import AgentConfig

log = logging.getLogger("fdcore.agent")

Change = Callable[[Status], None]


class StatusChanges:
    """Claims, expires, starts, finishes, hands back and takes over requests for one agent."""

    def __init__(
        self,
        config: AgentConfig,
        mailbox: Mailbox,
        instance: str,
        holdings: Holdings,
        record_time: Callable[[], datetime | None] = lambda: None,
    ) -> None:
        self.config = config
        self.agent = config.name
        self.mailbox = mailbox
        self.instance = instance
        self.holdings = holdings
        # The time (the store's) of this agent's record that landed last, None before one did:
        # stamped on a request's work when a status write of it lands (Work.seen_ours_under).
        self.record_time = record_time

    def read(self, request_id: str) -> Versioned[Status] | None:
        """The request's status as stored (None if absent or unreadable, which is reported)."""
        return self.mailbox.read_or_report(Status, status_key(request_id))

    def still_held(self, work: Work) -> bool:
        """Re-read the request's status: True while this agent holds it, else drop it (False).

        The ownership check before a table and at each lease renewal: a request taken over while
        this agent was paused stops here. On True ``work`` carries the status as read.
        """
        current = self.read(work.id)
        if current is None:
            self.holdings.drop(work, "status gone or unreadable")
            return False
        if not is_held_by(current.value, self.agent, work.status.attempt):
            self.holdings.drop(work, "status names another agent")
            return False
        work.status, work.etag = current.value, current.etag
        return True

    # -- creating a status -------------------------------------------------------------------------

    def claim(self, request: Request, now: datetime, start: bool = False) -> None:
        """Create the request's status naming this agent: held if the create lands.

        ``start``: a worker is free to start it at once, so the status is created ``running``
        (the start folded into the claim: one write, not two).
        """
        status = Status(
            request=request.id,
            state=State.RUNNING if start else State.ACCEPTED,
            agent=self.agent,
            updated_at=now,
            attempt=1,
            attempts=[self._attempt(1, now)],
        )
        unfit = self.mailbox.unfit(request, self.agent)
        if unfit is not None:  # it could never be run through: it fails here, no table run
            status = self._failure(status, unfit, now)
        try:
            etag = self._create(request, status)
        except AlreadyExists:
            return  # another agent claimed it first
        if etag is None:
            return
        if status.state.final:
            self.holdings.final.add(request.id)
            log.warning("%s: request %s failed: %s", self.agent, request.id, status.message)
            return
        log.info("%s: claimed request %s", self.agent, request.id)
        self.holdings.add(Work(request, status, etag, seen_ours_under=self.record_time()))

    def expire(self, request: Request, now: datetime) -> None:
        """Create an ``expired`` status for an unclaimed request past its deadline."""
        deadline = f"{request.deadline:%Y-%m-%dT%H:%M:%S}Z"
        status = Status.ended_unclaimed(
            request.id, State.EXPIRED, f"not claimed before its deadline {deadline}", now
        )
        try:
            if self._create(request, status) is None:
                return
            log.info("%s: request %s expired unclaimed", self.agent, request.id)
            self._audit("expire", request.id, now, detail=status.message)
        except AlreadyExists:
            pass  # another agent ended or claimed it: final or held, not ours to claim
        self.holdings.final.add(request.id)

    def _audit(
        self,
        action: str,
        request_id: str,
        now: datetime,
        *,
        outcome: str = "ok",
        detail: str | None,
    ) -> None:
        """One event of this agent's in the audit trail, about ``request_id``."""
        audit.record(
            self.mailbox,
            action,
            request_id,
            actor=self.agent,
            via="agent",
            at=now,
            outcome=outcome,
            request=request_id,
            detail=detail,
        )

    def _create(self, request: Request, status: Status) -> str | None:
        """Create the first status of ``request``: its etag, or None when the request cannot
        have one (retention moved it, or its id makes no key here), which is handled here.
        AlreadyExists is the caller's: another agent was first."""
        try:
            return create_status(self.mailbox, status)
        except NotFound:
            self._moved_away(request)
        except InvalidKey as exc:
            self._blocked(request, exc)
        return None

    # -- replacing a status this agent holds -------------------------------------------------------

    def start(self, work: Work, now: datetime) -> bool:
        """Mark the request running (its first table is about to start); False if not ours."""
        return self._replace(work, now, _running(now))

    def table_done(self, work: Work, table: str, now: datetime) -> bool:
        """Record ``table`` in ``tables_done`` (once, whatever the retries); False if not ours."""
        return self._replace(work, now, _with_table_done(table))

    def succeed(self, work: Work, now: datetime, last_table: str | None = None) -> bool:
        """Every table is done: the request succeeded. False if it is not ours.

        ``last_table``: the table that just ended, recorded in ``tables_done`` by the same write
        (the last table folded into the finish).
        """
        finish = _finished(State.SUCCEEDED, Outcome.SUCCEEDED, now)
        if last_table is not None:
            finish = _both(_with_table_done(last_table), finish)
        if not self._replace(work, now, finish):
            return False
        log.info("%s: request %s succeeded", self.agent, work.id)
        return True

    def fail(self, work: Work, message: str, now: datetime) -> bool:
        """A table failed, and with it the request. False if it is not ours."""
        if not self._replace(work, now, _finished(State.FAILED, Outcome.FAILED, now, message)):
            return False
        log.warning("%s: request %s failed: %s", self.agent, work.id, message)
        return True

    def cancel(self, work: Work, message: str, now: datetime) -> bool:
        """An operator cancelled the request (``cancels/``): it ends here. False if not ours."""
        if not self._replace(
            work, now, _finished(State.CANCELLED, Outcome.CANCELLED, now, message)
        ):
            return False
        log.warning("%s: request %s %s", self.agent, work.id, message)
        return True

    def hand_back(self, work: Work, now: datetime) -> None:
        """Give the request back to the pool (the agent is stopping) and stop holding it."""
        status = work.status
        if not status.tables_done and len(status.attempts) <= 1:
            # Nothing done and no history: delete the claim, so any agent (of any version)
            # sees a plain unclaimed request again.
            with contextlib.suppress(PreconditionFailed, NotFound):
                self.mailbox.storage.delete(status_key(work.id), work.etag)
        else:
            self._replace(work, now, _handed_back(now))
        log.info("%s: handed request %s back", self.agent, work.id)
        self.holdings.forget(work)

    def take_over(
        self, found: Versioned[Status], request: Request, now: datetime, reason: str, lost: bool
    ) -> None:
        """Replace a status this agent does not hold with a new attempt of its own.

        ``lost``: the attempt's agent is lost (its attempt counts against ``max_attempts``, and
        past them the request fails instead); else the request was handed back or left by an
        earlier process of this agent.
        """
        status = copy.deepcopy(found.value)
        previous = status.agent
        if status.attempts and status.attempts[-1].outcome is Outcome.RUNNING:
            status.attempts[-1].outcome = Outcome.LOST if lost else Outcome.STOPPED
            status.attempts[-1].ended_at = now
        elif not status.attempts and status.agent is not None:
            # A status from an older agent keeps no attempt list: record the attempt it implies.
            status.attempts.append(
                Attempt(
                    number=status.attempt,
                    agent=status.agent,
                    started_at=status.updated_at,
                    ended_at=now,
                    outcome=Outcome.LOST,
                )
            )
        lost_attempts = sum(1 for a in status.attempts if a.outcome is Outcome.LOST)
        max_attempts = request.max_attempts or self.config.max_attempts
        status.updated_at = now
        if lost and lost_attempts >= max_attempts:
            agents = ", ".join(dict.fromkeys(a.agent for a in status.attempts))
            status.state = State.FAILED
            status.message = f"failed after {lost_attempts} lost attempts (agents: {agents})"
        else:
            status.attempt += 1
            status.agent = self.agent
            status.state = State.ACCEPTED
            status.attempts.append(self._attempt(status.attempt, now))
        try:
            try:
                etag = self.mailbox.replace(status_key(request.id), status, found.etag)
            except FileTooLarge as exc:  # one attempt more would not fit: it fails here
                status = self._failure(status, _over_bound(exc), now)
                etag = self.mailbox.replace(status_key(request.id), status, found.etag)
        except (PreconditionFailed, NotFound):
            return  # another agent moved it first
        if previous != self.agent:  # another agent's request, not this agent's own earlier one
            self._audit(
                "takeover",
                request.id,
                now,
                outcome=f"failed: {status.message}" if status.state.final else "ok",
                detail=f"from {previous or 'nobody'} ({reason}), attempt {status.attempt}",
            )
        if status.state.final:
            self.holdings.final.add(request.id)
            log.warning("%s: request %s %s", self.agent, request.id, status.message)
            return
        log.info(
            "%s: took over request %s as attempt %d (%s)",
            self.agent,
            request.id,
            status.attempt,
            reason,
        )
        self.holdings.add(Work(request, status, etag, seen_ours_under=self.record_time()))

    def _replace(self, work: Work, now: datetime, change: Change) -> bool:
        """Apply ``change`` to the request's status with If-Match; False if it is not ours now.

        An etag mismatch is not always another agent: a write of ours whose answer was lost
        (a store error after it landed) leaves the status changed by us. Only this agent writes
        a status naming it and its attempt, so such a status is built on, not given up.
        A final status, written or found, ends the hold.
        """
        for _ in range(3):  # a rebase on our own landed write, then the write itself
            status = copy.deepcopy(work.status)
            change(status)
            status.updated_at = now
            work.seen_ours_under = None  # until the write is known to have landed
            try:
                try:
                    work.etag = self.mailbox.replace(status_key(work.id), status, work.etag)
                except FileTooLarge as exc:
                    # A status its readers would refuse would hold the request for ever: the
                    # request fails instead, in a status that fits; the change is not made.
                    failed = self._failure(work.status, _over_bound(exc), now)
                    work.etag = self.mailbox.replace(status_key(work.id), failed, work.etag)
                    work.status = failed
                    log.warning("%s: request %s failed: %s", self.agent, work.id, failed.message)
                    self.finished_with(work)
                    return False
            except NotFound:
                self.holdings.drop(work, "status removed")
                return False
            except PreconditionFailed:
                current = self.read(work.id)
                if current is None or not is_attempt_of(
                    current.value, self.agent, work.status.attempt
                ):
                    self.holdings.drop(work, "status changed by another agent")
                    return False
                work.status, work.etag = current.value, current.etag
                if current.value.state.final:
                    # Our own final write landed; nothing more to change.
                    self.finished_with(work)
                    return current.value.state is status.state
                continue
            work.status, work.seen_ours_under = status, self.record_time()
            if status.state.final:
                self.finished_with(work)
            return True
        self.holdings.drop(work, "status keeps changing under this agent")
        return False

    def finished_with(self, work: Work) -> None:
        """The request's status is final: never looked at again, no longer held."""
        self.holdings.final.add(work.id)
        self.holdings.forget(work)

    def _moved_away(self, request: Request) -> None:
        """The request ended and retention moved it while this agent took it for unclaimed
        (another agent ran it after this one's listing, and a move took it before this create
        landed): the create was withdrawn; nothing to do."""
        log.info("%s: request %s was archived meanwhile; not claimed", self.agent, request.id)

    def _blocked(self, request: Request, exc: InvalidKey) -> None:
        """Something that is no file (a folder) sits where the request's status belongs: report
        it once; the request stays unclaimed, and ``fdcore queue`` shows it unreadable."""
        key = status_key(request.id)
        self.mailbox.problems.report(key, f"{exc}; request {request.id} cannot be claimed")

    def _failure(self, status: Status, reason: str, now: datetime) -> Status:
        """``status`` failed in its last attempt for ``reason``, within the size bound: as it
        is; else with its earlier attempts left out; else with the last attempt alone (a
        request id, two names, a few times and the reason: far below the least bound)."""
        failed = copy.deepcopy(status)
        failed.updated_at = now
        _finished(State.FAILED, Outcome.FAILED, now, reason)(failed)
        key = status_key(status.request)
        if self.mailbox.fits(key, failed):
            return failed
        failed.attempts = failed.attempts[-1:]
        if self.mailbox.fits(key, failed):
            return failed
        last = self._attempt(status.attempt, now)
        if status.attempts:
            last.started_at = status.attempts[-1].started_at
        return Status(
            request=status.request,
            state=State.FAILED,
            updated_at=now,
            agent=self.agent,
            attempt=status.attempt,
            attempts=[attrs.evolve(last, ended_at=now, outcome=Outcome.FAILED, message=reason)],
            message=reason,
        )

    def _attempt(self, number: int, now: datetime) -> Attempt:
        return Attempt(number=number, agent=self.agent, started_at=now, instance=self.instance)


def _over_bound(exc: FileTooLarge) -> str:
    return (
        f"its status would be {exc.size} bytes, over the bound of {exc.bound} bytes its "
        "readers read (max_file_bytes)"
    )


def _running(now: datetime) -> Change:
    def change(status: Status) -> None:
        status.state = State.RUNNING
        if status.attempts:
            status.attempts[-1].started_at = now

    return change


def _with_table_done(table: str) -> Change:
    def change(status: Status) -> None:
        if table not in status.tables_done:
            status.tables_done.append(table)

    return change


def _both(first: Change, second: Change) -> Change:
    def change(status: Status) -> None:
        first(status)
        second(status)

    return change


def _finished(state: State, outcome: Outcome, now: datetime, message: str | None = None) -> Change:
    def change(status: Status) -> None:
        status.state = state
        status.message = message
        if status.attempts:
            status.attempts[-1].outcome = outcome
            status.attempts[-1].ended_at = now
            status.attempts[-1].message = message

    return change


def _handed_back(now: datetime) -> Change:
    def change(status: Status) -> None:
        status.state = State.ACCEPTED
        status.agent = None
        if status.attempts:
            status.attempts[-1].outcome = Outcome.STOPPED
            status.attempts[-1].ended_at = now

    return change
