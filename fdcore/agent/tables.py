"""A held request's tables, one at a time, each under its table's lease.

For each table: take the lease (and give it up if the write took so long it is nearly gone),
re-read the request's status (stop if another agent holds it now), start the run, poll it and
renew the lease while it runs, then record the finished table: check the lease is still ours,
update the status (``If-Match``), write the run record, release the lease. A table whose lease
was lost while the request stayed ours runs again in the same attempt: a lapsed lease costs a
re-run, never an attempt. Once the status records a table its run record is owed: one a store
error kept back is written at a later poll, even after the request ended, and follows the
request into the archive if retention moved it meanwhile.

A table that ran to its end under a lease still ours is recorded in the run log even when the
request was taken over meanwhile (its status update fails), before the lease is let go; and an
attempt after the first reads the earlier attempts' run records of a table once it holds the
table's lease: a table an earlier attempt finished is recorded done, never run again.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs

from fdcore.abc import FinishReleasesLease, HeldLease, LeaseWaits, TableJob, TableResult
from fdcore.agent.components import Components
from fdcore.agent.release import release, run_as
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.work import Holdings, Work, is_attempt_of
from fdcore.clock import Clock
from fdcore.contract.codec import encode
from fdcore.contract.layout import run_key
from fdcore.contract.models import LastJob, Outcome, RunRecord, State, output_tail
from fdcore.errors import (
    AlreadyExists,
    ArchiveConflict,
    InvalidKey,
    LeaseLost,
    MailboxFileError,
    StorageUnavailable,
)
from fdcore.mailbox.access import Mailbox, Versioned
from fdcore.mailbox.archive import archived_status, follow_to_archive
from fdcore.mailbox.counting import CountingStore, charged_to
from fdcore.settings.agent_toml import AgentConfig

log = logging.getLogger("fdcore.agent")

#: A run record's message, cut to this many characters when the record would not fit its bound.
SHORT_MESSAGE = 500


class Tables:
    """Runs held requests' tables under their leases and records each one."""

    def __init__(
        self,
        config: AgentConfig,
        mailbox: Mailbox,
        components: Components,
        clock: Clock,
        status_changes: StatusChanges,
        holdings: Holdings,
        *,
        skew: ClockSkew,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.config = config
        self.agent = config.name
        self.mailbox = mailbox
        # Whether the agent may start a table now: its record landed recently enough that no
        # one can judge it lost before its next one (written first if due; Agent.keep_alive).
        self.ready = ready
        self.leases = components.leases
        # Asked once: a runtime-checkable protocol's isinstance walks its members at each call.
        self._finish_frees = (
            isinstance(self.leases, FinishReleasesLease) and self.leases.finish_releases
        )
        self._lease_waits = self.leases if isinstance(self.leases, LeaseWaits) else None
        self.start_table = components.start_table
        self.clock = clock
        self.status_changes = status_changes
        self.holdings = holdings
        # Run records a store error kept from being written, by key. Their status change
        # landed, so no poll will record the table again: they are written from here.
        self.unwritten: dict[str, RunRecord] = {}
        # Runs of requests no longer held whose record a store error left undecided, by
        # request: the request's work, the lease the run ended under, its result (_settle)
        self.owed: dict[str, tuple[Work, HeldLease, TableResult]] = {}
        self.skew = skew  # this agent's clock against the store's
        # Whether the store counts this agent's operations: each run record then carries its
        # table's (Work.operations, charged by Agent._move_held_work)
        self.counted = isinstance(mailbox.storage, CountingStore)
        # Tables whose lease a held request waits for in this step, with when the lease that
        # refused it runs out (lease time; None if not known); and whether this agent gave one
        # of them up after it was refused (the waiting request can start at once).
        self.waiting: dict[str, datetime | None] = {}
        self.freed_for_waiting = False

    def new_step(self) -> None:
        """A pass over the held requests begins: each waiting one says again what it waits for."""
        self.waiting = {}
        self.freed_for_waiting = False

    def next_free(self, now: datetime) -> datetime | None:
        """When a lease a held request waits for can next be free (``now``'s clock): at once
        if this agent gave it up after the request was refused it, else when it runs out."""
        if self.freed_for_waiting:
            return now
        lease_now = self.lease_now()
        free = [now + (at - lease_now) for at in self.waiting.values() if at is not None]
        return min(free, default=None)

    def _released(self, table: str) -> None:
        if table in self.waiting:
            self.freed_for_waiting = True

    def poll_run(self, work: Work, now: datetime) -> bool:
        """Follow the request's table run: renew its lease, record it once it ended.

        True when no table of the request runs and it is still held: it may move on.
        """
        if work.run is not None:
            work.result = work.run.poll()
            if work.result is None:
                self._keep_lease(work)
                return False
            work.run = None
            work.table_ended = now
        if work.result is not None:
            # Recorded here, or on a later poll if a store error cuts this one short: a
            # finished table is never run again for want of its status update.
            self._record(work, work.result, now)
        return self.holdings.holds(work)

    def next_table(self, work: Work, now: datetime) -> None:
        """Start the request's next table, or finish the request when none is left."""
        if not work.running and not self.status_changes.start(work, now):
            return
        while self.holdings.holds(work):
            remaining = [t for t in work.request.entities if t not in work.status.tables_done]
            if not remaining:
                self.status_changes.succeed(work, now)
                return
            table = remaining[0]
            if work.lease is not None and work.lease.lease.table != table:
                # The last table's lease, still held because a store error cut its finish
                # short: give it up, never run this table under it (its generation fences
                # another table).
                self.release_lease(work, now)
            if work.lease is None and not (self.ready() and self._take_lease(work, table)):
                return
            # Ownership check, once the lease is held: a request taken over stops here.
            if not self._surely_ours(work) and not self.status_changes.still_held(work):
                return
            if table in work.status.tables_done:
                # Our own "done" update landed although its answer was lost: the table is done.
                self.release_lease(work, now)
                return
            if not self._done_earlier(work, table, now):
                self._start(work, table, now)
                return

    def _surely_ours(self, work: Work) -> bool:
        """No other agent can have taken the request over since this one's own status write
        of it landed, so the ownership check's read can go.

        Only an agent that judges this one lost takes a held status over, and that takes this
        agent's record ``stale_after + grace_seconds`` old. A record at most ``stale_after / 2``
        old by the clock now stood when the write landed, and every later one is newer: none
        was that old at any moment since. The clock now counts a pause since; a write whose
        outcome is unknown (its answer lost) leaves nothing to go by, and the status is read.
        """
        seen = work.seen_ours_under
        if seen is None:
            return False
        age = self.lease_now() - seen
        return timedelta(0) <= age <= timedelta(seconds=self.config.stale_after / 2)

    def _done_earlier(self, work: Work, table: str, now: datetime) -> bool:
        """Record ``table`` done if an earlier attempt's run record says it succeeded; True if
        so (the request may move on to its next table).

        Read once this attempt holds the table's lease: the earlier holder writes that record
        before it lets the lease go (:meth:`_record`), so a record of a run that ended under
        its lease is there by the time the lease can be ours. The first attempt has none to
        read; a later one reads one key per earlier attempt."""
        assert work.lease is not None
        for attempt in range(1, work.status.attempt):
            found = self.mailbox.read_or_report(RunRecord, run_key(work.id, attempt, table))
            record = found.value if found is not None else None
            if record is not None and record.outcome is Outcome.SUCCEEDED:
                break
        else:
            return False
        log.info(
            "%s: request %s: table %s ran to its end in attempt %d; not run again",
            self.agent,
            work.id,
            table,
            attempt,
        )
        held = work.lease
        if not self._record_in_status(work, table, TableResult(True), now):
            return False
        self._let_go(work, held, now)
        return True

    def _let_go(self, work: Work, held: HeldLease, now: datetime) -> None:
        """Release the lease of a table the status records as ended, unless the request's
        final status freed it already."""
        finished = not self.holdings.holds(work)  # the status write made the request final
        if not (finished and self._finish_frees):
            self.leases.release(held, now)
        self._released(held.lease.table)
        work.lease = None

    def release_lease(self, work: Work, now: datetime) -> None:
        """Give the request's table lease back, if it holds one."""
        if work.lease is not None:
            self.leases.release(work.lease, now)
            self._released(work.lease.lease.table)
            work.lease = None

    def _take_lease(self, work: Work, table: str) -> bool:
        """Acquire the table's lease for the request; False while another holder's runs."""
        grace = self.config.grace_seconds
        if self.skew.unmeasured:
            return False  # which time to write the lease in is not known yet (ClockSkew)
        if self.skew.refuses_takeover:
            # A clock this far off could judge a live holder's lease run out: only a lease its
            # holder gave up (released, or freed by its finish) is taken.
            grace = math.inf
        try:
            work.lease = self.leases.acquire(
                table,
                self.agent,
                work.id,
                work.status.attempt,
                self.config.lease_ttl,
                self.lease_now(),
                grace=grace,
            )
        except MailboxFileError as exc:
            self.mailbox.problems.report(str(exc.path), f"{exc}; cannot lease table {table}")
            return False
        if work.lease is None:
            # Another holder's lease still runs: wait for it to be freed or to run out.
            self.waiting[table] = (
                self._lease_waits.free_at(table) if self._lease_waits is not None else None
            )
            return False
        self._check_lease_time(work)
        return work.lease is not None

    def lease_now(self) -> datetime:
        """The time leases are written in and judged by: the store's, once this agent measured
        its clock far off it (others judge its leases by their clocks)."""
        now = self.clock.now()
        return self.skew.store_time(now)

    def _start(self, work: Work, table: str, now: datetime) -> None:
        assert work.lease is not None
        job = TableJob(
            request=work.id,
            table=table,
            attempt=work.status.attempt,
            fencing_token=work.lease.lease.generation,
            agent=self.agent,
            environment=self.mailbox.storage.url,
            run_as=self.configured_run_as(work),
        )
        work.table_started, work.table_ended = now, None
        try:
            work.run = self.start_table(job)
        except Exception as exc:  # a runner that cannot start fails the table, not the agent
            self._record(work, TableResult(False, f"could not start: {exc}"), now)

    def configured_run_as(self, work: Work) -> str | None:
        """The identity configured for the request's tables: its schedule's ``run_as`` (if
        this agent has that schedule and it names one), else ``[runner] run_as``."""
        ref = work.request.schedule
        if ref is not None:
            for schedule in self.config.schedules:
                if schedule.id == ref.id and schedule.run_as is not None:
                    return schedule.run_as
        return self.config.run_as

    def _keep_lease(self, work: Work) -> None:
        """Renew a running table's lease in time, or stop the table before the lease runs out.

        Renewal is also when a long table re-checks that its request is still this agent's: an
        agent that was paused and taken over learns it here, not only when the table ends.
        """
        held = work.lease
        if held is None:
            return
        ttl = self.config.lease_ttl
        # Lease times come from the clock now, not from the poll's start: a slow poll must not
        # write a lease that is already half gone.
        now = self.lease_now()
        if held.lease.expires_at - now > timedelta(seconds=ttl / 2):
            return
        try:
            if not self.status_changes.still_held(work):
                return
            work.lease = self.leases.renew(held, ttl, now)
            self._check_lease_time(work)
        except LeaseLost:
            self._interrupted(work, f"lease on table {held.lease.table} was taken")
        except StorageUnavailable:
            # Not renewed: once the lease would run out before the next poll, another agent may
            # take it, so stop the table now rather than write beside the next holder.
            margin = timedelta(seconds=self.config.poll_seconds)
            if self.lease_now() >= held.lease.expires_at - margin:
                self._interrupted(work, f"lease on table {held.lease.table} not renewed")

    def _check_lease_time(self, work: Work) -> None:
        """Give up a lease whose write took so long (storage retries) that it is nearly gone."""
        held = work.lease
        assert held is not None
        if self.lease_now() >= held.lease.expires_at - timedelta(seconds=self.config.poll_seconds):
            log.warning(
                "%s: lease on table %s took too long to write; letting it go",
                self.agent,
                held.lease.table,
            )
            if work.run is not None:
                self._interrupted(work, f"lease on table {held.lease.table} ran out")
            else:
                with contextlib.suppress(StorageUnavailable):
                    self.leases.release(held, self.clock.now())
                work.lease = None

    def _interrupted(self, work: Work, why: str) -> None:
        """The table's lease is gone but the request is still ours: run the table again.

        Its run is stopped and its result, if any, thrown away; the lease is not released (it
        is not ours). A lapsed lease costs the table a re-run, never the request an attempt.
        """
        log.warning("%s: request %s: %s; the table will run again", self.agent, work.id, why)
        work.cancel_run()
        work.lease = None
        work.result = None

    def _record(self, work: Work, result: TableResult, now: datetime) -> None:
        """Record a finished table: status first (If-Match), then the run record, then release."""
        work.run = None
        work.result = result
        held = work.lease
        assert held is not None
        table = held.lease.table
        # Record nothing unless the lease is still ours: a paused agent waking up after a
        # takeover must not log (or count) a table the new owner holds.
        try:
            current = self.leases.current(table)
        except MailboxFileError as exc:
            self.mailbox.problems.report(str(exc.path), str(exc))
            current = None
        attempt = work.status.attempt
        if current is None or current.generation != held.lease.generation:
            if self._recorded_earlier(work, held, result, now):
                return
            if self.status_changes.still_held(work):
                self._interrupted(work, f"lease on table {table} was taken")
            return
        # The status update (If-Match) comes first: it proves the request is still ours, and once
        # it lands a crash cannot make another agent run the table again. The run log follows.
        # The lease stays held (``held``) if the update finds the request taken over: it is let
        # go only once the run record the new holder reads is written (below).
        work.lease = None
        try:
            ours = self._record_in_status(work, table, result, now)
        except BaseException:
            work.lease = held  # cut short (a store error): a later step records it again
            raise
        if not ours:
            # Another agent holds the request now (it was dropped), or our write failed it. The
            # table ran to its end under a lease still ours: the run is owed its record, which
            # the new holder reads once it holds the lease (_done_earlier), so the lease is
            # let go only after it (a lease a final status freed needs no release).
            self._settle(work, held, result, now, raise_unavailable=True)
            return
        work.lease = held  # until released below
        outcome = Outcome.SUCCEEDED if result.succeeded else Outcome.FAILED
        self.write_run_record(work, held, attempt, outcome, result, now)
        self._let_go(work, held, now)
        work.result = None

    def _record_in_status(self, work: Work, table: str, result: TableResult, now: datetime) -> bool:
        """The table's end in the status: done (with the request's success if it was the
        last) or failed; False if the request is not ours now."""
        remaining = [t for t in work.request.entities if t not in work.status.tables_done]
        if result.succeeded and remaining == [table]:
            return self.status_changes.succeed(work, now, last_table=table)
        if result.succeeded:
            return self.status_changes.table_done(work, table, now)
        message = f"table {table} failed: {result.message}"
        return self.status_changes.fail(work, message, now)

    def _settle(
        self,
        work: Work,
        held: HeldLease,
        result: TableResult,
        now: datetime,
        raise_unavailable: bool = False,
    ) -> None:
        """Write the record a run of a request no longer held is owed, if the status says it
        is owed one, then let the lease go. Deciding reads the status, or its archived copy:
        a store error keeps the run in ``owed``, tried again at each poll
        (:meth:`settle_owed`), since no other step of this agent looks at the request again."""
        try:
            self._recorded_earlier(work, held, result, now)
        except StorageUnavailable:
            self.owed[work.id] = (work, held, result)
            if raise_unavailable:
                raise
            return
        self.owed.pop(work.id, None)
        if work.id not in self.holdings.final:
            with contextlib.suppress(StorageUnavailable):  # unreleased, it runs out
                self.leases.release(held, now)

    def settle_owed(self, now: datetime) -> None:
        """At each poll: settle the runs a store error left undecided (:meth:`_settle`)."""
        for work, held, result in list(self.owed.values()):
            self._settle(work, held, result, now)

    def _recorded_earlier(
        self, work: Work, held: HeldLease, result: TableResult, now: datetime
    ) -> bool:
        """The status records this attempt's table though the change's answer was lost, and
        since then the lease moved on (a final status frees it) or another agent took the
        request over: write the run record it is owed. False if the status does not say so.
        """
        found = self.status_changes.read(work.id)
        if found is None:
            # Moved by retention since (after a final status whose answer was lost, say).
            try:
                archived = archived_status(self.mailbox, work.id)
            except MailboxFileError as exc:
                self.mailbox.problems.report(str(exc.path), str(exc))
                return False
            if archived is None:
                return False
            found = Versioned(archived, "")
        status, attempt, table = found.value, work.status.attempt, held.lease.table
        if is_attempt_of(status, self.agent, attempt):
            # Our attempt failed the request: this table failed, or the status could not grow
            # to count it (over the size bound); either way the table ran and ended.
            ours = status.attempts[-1].outcome if status.attempts else None
            ended = status.state is State.FAILED and ours is Outcome.FAILED
            recorded = ended or (result.succeeded and table in status.tables_done)
        else:
            # Taken over, and the table succeeded under a lease nobody has taken since: its
            # fenced writes were accepted, so the run counts, for the log and for every later
            # attempt (which reads it before running the table: _done_earlier), whether or not
            # our change recording it landed before the takeover.
            recorded = result.succeeded and self._lease_unmoved(held)
        if not recorded:
            return False
        outcome = Outcome.SUCCEEDED if result.succeeded else Outcome.FAILED
        self.write_run_record(work, held, attempt, outcome, result, now)
        if not self.holdings.holds(work):
            return True  # dropped: the other agent's now
        work.status, work.etag = status, found.etag
        if status.state.final:
            self.status_changes.finished_with(work)
        work.lease = None  # moved on: nothing of ours to release
        work.result = None
        return True

    def _lease_unmoved(self, held: HeldLease) -> bool:
        try:
            current = self.leases.current(held.lease.table)
        except MailboxFileError:
            return False
        return current is not None and current.generation == held.lease.generation

    def write_run_record(
        self,
        work: Work,
        held: HeldLease,
        attempt: int,
        outcome: Outcome,
        result: TableResult,
        now: datetime,
    ) -> None:
        """The run log's record of the table ``held`` is the lease of (once per attempt and
        table), written after the status change that proves the table ran for the request."""
        table = held.lease.table
        record = RunRecord(
            request=work.id,
            table=table,
            agent=self.agent,
            attempt=attempt,
            generation=held.lease.generation,
            started_at=work.table_started or now,
            ended_at=work.table_ended or now,
            outcome=outcome,
            message=result.message or None,
            exit_code=result.exit_code,
            output=output_tail(result.output) or None,
            stdout=output_tail(result.stdout) or None,
            run_as=run_as(self.configured_run_as(work)),
            release=release(),
            operations=self._operations(work),
            compute_per_hour=self.config.compute_per_hour,
        )
        # The first record stands: a retried status change must not move the table's end.
        key = run_key(work.id, attempt, table)
        if key not in self.unwritten:
            self.unwritten[key] = self._within_bound(key, record)
            self.holdings.last_jobs.append(LastJob(work.id, table, outcome, record.ended_at))
        self.write_unwritten(raise_unavailable=True)

    def _operations(self, work: Work) -> dict[str, int] | None:
        """The table's store operations, its run record's create included (made uncharged:
        :meth:`write_unwritten`); the request's count starts again for its next table."""
        if not self.counted:
            return None
        work.operations["create"] += 1
        operations = {kind: n for kind, n in sorted(work.operations.items()) if n}
        work.operations.clear()
        return operations

    def _within_bound(self, key: str, record: RunRecord) -> RunRecord:
        """``record`` within the size bound: its message cut short if long, then as much of the
        end of the table's stdout, then of its output, as the bound leaves room for (a 4 KiB
        bound cannot hold 4 KiB of output with the rest). The run is always recorded."""
        message = record.message or ""
        if len(message) > SHORT_MESSAGE and not self.mailbox.fits(key, record):
            record = attrs.evolve(record, message=message[:SHORT_MESSAGE] + "...")
        for name in ("stdout", "output"):  # stdout's tail goes first: stderr says why
            while getattr(record, name) and not self.mailbox.fits(key, record):
                text: str = getattr(record, name)
                size = len(text.encode("utf-8"))
                over = len(encode(record)) - self.mailbox.max_file_bytes
                # An escaped byte takes up to six: cut the excess (at least half), then look again
                tail = output_tail(text, size - over if over < size // 2 else size // 2)
                changes: dict[str, Any] = {name: tail or None}
                record = attrs.evolve(record, **changes)
        return record

    def write_unwritten(self, raise_unavailable: bool = False) -> None:
        """Write the run records still owed, oldest first; stop at the first store error.

        A poll calls it with the store errors kept in (an outage is no reason to skip the
        renewal of a running table's lease); the write right after a table's status change
        lets one out, so the poll reports it as it reports any outage.
        """
        while self.unwritten:
            key, record = next(iter(self.unwritten.items()))
            try:
                # charged to no table: the record counts its own create (_operations)
                with charged_to(self.mailbox.storage, None):
                    with contextlib.suppress(AlreadyExists):  # there already: a lost answer
                        self.mailbox.create(key, record)
                    follow_to_archive(self.mailbox, record.request, key)
            except (InvalidKey, ArchiveConflict, MailboxFileError) as exc:
                # a file where the request's runs/ folder belongs; or an archived record of
                # the same name that differs (the archive's stands)
                self.mailbox.problems.report(key, f"{exc}; run record not written")
            except StorageUnavailable:
                if raise_unavailable:
                    raise
                return
            del self.unwritten[key]
