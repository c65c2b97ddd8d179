"""The agent: one deterministic step (:meth:`Agent.poll`) at a time.

Each poll the agent rewrites its status record, moves the requests it holds forward (one table
at a time, each under the table's lease, each after re-reading the request's status), and looks
for work: unclaimed requests to claim or expire, its own requests left by an earlier process, and
(with ``take_over``) requests of lost agents.

Nothing here sleeps, starts threads or reads the wall clock: time comes from the injected clock and
table runs are polled, never waited on. The runtime shell (:mod:`fdcore.runtime`) calls
:meth:`Agent.poll` in a loop; the simulator calls the same code under virtual time.

Every status change is an ``If-Match`` replace on the etag this agent last read or wrote. A
failed one means another agent holds the request now: this agent stops it and writes nothing more.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import attrs

from fdcore import __version__
from fdcore.abc import (
    AgentLoad,
    HeldLease,
    TableJob,
    TableResult,
    TableRun,
)
from fdcore.agent.components import Components
from fdcore.agent.schedules import Schedule, create_due_requests
from fdcore.agent.settings import AgentConfig
from fdcore.clock import Clock
from fdcore.contract.layout import agent_key, request_key, run_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, Outcome, Request, RunRecord, State, Status
from fdcore.errors import (
    AlreadyExists,
    DuplicateAgent,
    LeaseLost,
    MailboxFileError,
    NotFound,
    PreconditionFailed,
    StorageUnavailable,
)
from fdcore.mailbox.access import Mailbox, ProblemLog, Versioned

log = logging.getLogger("fdcore.agent")


@attrs.define
class Work:
    """A request this agent holds: claimed (waiting for a worker) or running."""

    request: Request
    status: Status
    etag: str
    run: TableRun | None = None
    lease: HeldLease | None = None
    table_started: datetime | None = None
    result: TableResult | None = None  # a finished table's result until it is recorded

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def running(self) -> bool:
        return self.status.state is State.RUNNING


class Agent:
    """One agent process's logic over a mailbox."""

    def __init__(
        self,
        config: AgentConfig,
        mailbox: Mailbox,
        components: Components,
        clock: Clock,
        *,
        instance: str | None = None,
        previous_process_gone: Callable[[AgentRecord], bool] = lambda record: False,
        schedules: list[Schedule] | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.mailbox = mailbox
        self.parts = components
        self.clock = clock
        self.instance = instance or uuid.uuid4().hex
        self.previous_process_gone = previous_process_gone
        self.schedules = schedules or []
        self.held: dict[str, Work] = {}
        self.stopping = False
        self.started_at: datetime | None = None
        self._record_etag: str | None = None
        self._record_extra: dict[str, object] = {}
        self._requests: dict[str, Request] = {}  # requests never change once written
        self._final: set[str] = set()  # requests whose status is final: never looked at again
        self._last_sweep: datetime | None = None
        self._outage: str | None = None
        self.problems: ProblemLog = mailbox.problems

    # -- the step --------------------------------------------------------------------------------

    def poll(self) -> None:
        """One step: heartbeat, move held work forward, look for more work."""
        now = self.clock.now()
        try:
            self._heartbeat(now)
            self._advance(now)
            if not self.stopping:
                create_due_requests(self.schedules, self.mailbox, self.name, now)
                self._scan(now)
                self._advance(now)
        except StorageUnavailable as exc:
            # The mailbox cannot be reached: keep what we hold, report once, retry next poll.
            if self._outage is None:
                log.warning("%s: mailbox unavailable, will retry: %s", self.name, exc)
            self._outage = str(exc)
            return
        if self._outage is not None:
            log.info("%s: mailbox reachable again", self.name)
            self._outage = None

    def stop(self) -> None:
        """Stop claiming; hand back waiting requests; let running tables finish."""
        self.stopping = True

    @property
    def idle(self) -> bool:
        return not self.held

    def abandon(self) -> None:
        """Give up what is held now (the shutdown grace ran out): hand each request back."""
        now = self.clock.now()
        for work in list(self.held.values()):
            if work.run is not None:
                work.run.cancel()
                work.run = None
            self._hand_back(work, now)

    def close(self) -> None:
        """Write the final status record after a clean stop (if the mailbox can be reached)."""
        if self._record_etag is None:
            return
        try:
            self._heartbeat(self.clock.now(), stopped=True)
        except StorageUnavailable as exc:
            # Without it the record goes stale and readers judge this agent lost: it holds
            # nothing, so nothing moves.
            log.warning("%s: could not write the final status record: %s", self.name, exc)

    # -- status record ---------------------------------------------------------------------------

    def _record(self, now: datetime, stopped: bool) -> AgentRecord:
        record = AgentRecord(
            name=self.name,
            updated_at=now,
            stale_after=self.config.stale_after,
            version=__version__,
            instance=self.instance,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=self.started_at,
            concurrency=self.config.concurrency,
            running=sum(1 for work in self.held.values() if work.running),
            requests=sorted(self.held),
            claim=self.config.claim,
            take_over=self.config.take_over,
            stopping=self.stopping,
            stopped_at=now if stopped else None,
            schedules=[schedule.published(now) for schedule in self.schedules],
        )
        record.extra = dict(self._record_extra)
        return record

    def _heartbeat(self, now: datetime, stopped: bool = False) -> None:
        key = agent_key(self.name)
        if self._record_etag is None:
            self.started_at = now
            self._claim_name(now)
        record = self._record(now, stopped)
        try:
            if self._record_etag is None:
                self._record_etag = self.mailbox.create(key, record)
            else:
                self._record_etag = self.mailbox.replace(key, record, self._record_etag)
        except (PreconditionFailed, NotFound, AlreadyExists):
            current = self.mailbox.read_or_report(AgentRecord, key)
            if current is not None and current.value.instance == self.instance:
                # Our own earlier write landed although its answer was lost: write this one on
                # top of it, so the record says we are alive now.
                self._record_etag = self.mailbox.replace(key, record, current.etag)
                return
            other = _describe_process(current.value) if current else "unknown"
            raise DuplicateAgent(
                f"{key} was rewritten by another process ({other}): another agent runs as "
                f"{self.name!r}; this one stops"
            ) from None

    def _claim_name(self, now: datetime) -> None:
        """Refuse to start while another live process writes this agent's record."""
        key = agent_key(self.name)
        blob = self.mailbox.storage.read(key)
        if blob is None:
            return
        try:
            found = self.mailbox.read(AgentRecord, key)
        except MailboxFileError as exc:
            self.problems.report(key, f"{exc}; overwriting it")
            self._record_etag = blob.etag
            return
        assert found is not None
        record = found.value
        live = now <= record.updated_at + timedelta(seconds=record.stale_after)
        if (
            live
            and record.instance != self.instance
            and record.stopped_at is None
            and not self.previous_process_gone(record)
        ):
            raise DuplicateAgent(
                f"{key}: agent {self.name!r} is already running ({_describe_process(record)}, "
                f"last seen {record.updated_at:%Y-%m-%d %H:%M:%S}Z); "
                f"start it under another name or stop that process"
            )
        self._record_extra = dict(record.extra)
        self._record_etag = found.etag

    # -- moving held work forward ----------------------------------------------------------------

    def load(self) -> AgentLoad:
        """What the claim policy sees of this agent: workers, running and waiting requests."""
        running = sum(1 for work in self.held.values() if work.running)
        return AgentLoad(self.config.concurrency, running, len(self.held) - running)

    def _advance(self, now: datetime) -> None:
        for work in sorted(self.held.values(), key=lambda w: (not w.running, w.status.updated_at)):
            if work.id not in self.held:
                continue
            if work.run is not None:
                work.result = work.run.poll()
                if work.result is None:
                    self._keep_lease(work)
                    continue
                work.run = None
            if work.result is not None:
                # Recorded here, or on a later poll if a store error cuts this one short: a
                # finished table is never run again for want of its status update.
                self._finish_table(work, work.result, now)
                if work.id not in self.held:
                    continue
            if self.stopping:
                self._hand_back(work, now)
            elif work.running or self.load().running < self.config.concurrency:
                self._next_table(work, now)

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
        now = self.clock.now()
        if held.lease.expires_at - now > timedelta(seconds=ttl / 2):
            return
        try:
            if not self._still_mine(work):
                return
            work.lease = self.parts.leases.renew(held, ttl, now)
            self._check_lease_time(work)
        except LeaseLost:
            self._table_interrupted(work, f"lease on table {held.lease.table} was taken")
        except StorageUnavailable:
            # Not renewed: once the lease would run out before the next poll, another agent may
            # take it, so stop the table now rather than write beside the next holder.
            margin = timedelta(seconds=self.config.poll_seconds)
            if self.clock.now() >= held.lease.expires_at - margin:
                self._table_interrupted(work, f"lease on table {held.lease.table} not renewed")

    def _still_mine(self, work: Work) -> bool:
        """Re-read the request's status; stop the request (and say False) if it moved."""
        current = self._read_status(work.id)
        if current is None or not self._mine(current.value, work.status.attempt):
            self._lost(work, "status names another agent")
            return False
        work.status, work.etag = current.value, current.etag
        return True

    def _table_interrupted(self, work: Work, why: str) -> None:
        """The table's lease is gone but the request is still ours: run the table again.

        Its run is stopped and its result, if any, thrown away; the lease is not released (it
        is not ours). A lapsed lease costs the table a re-run, never the request an attempt.
        """
        log.warning("%s: request %s: %s; the table will run again", self.name, work.id, why)
        if work.run is not None:
            work.run.cancel()
            work.run = None
        work.lease = None
        work.result = None

    def _check_lease_time(self, work: Work) -> None:
        """Give up a lease whose write took so long (storage retries) that it is nearly gone."""
        held = work.lease
        assert held is not None
        if self.clock.now() >= held.lease.expires_at - timedelta(seconds=self.config.poll_seconds):
            log.warning(
                "%s: lease on table %s took too long to write; letting it go",
                self.name,
                held.lease.table,
            )
            if work.run is not None:
                self._table_interrupted(work, f"lease on table {held.lease.table} ran out")
            else:
                with contextlib.suppress(StorageUnavailable):
                    self.parts.leases.release(held, self.clock.now())
                work.lease = None

    def _next_table(self, work: Work, now: datetime) -> None:
        if not work.running and not self._update(work, now, _start_attempt(now)):
            return
        remaining = [t for t in work.request.entities if t not in work.status.tables_done]
        if not remaining:
            if self._update(work, now, _finish(State.SUCCEEDED, Outcome.SUCCEEDED, now)):
                log.info("%s: request %s succeeded", self.name, work.id)
                self._release(work)
            return
        table = remaining[0]
        if work.lease is not None and work.lease.lease.table != table:
            # The last table's lease, still held because a store error cut its finish short:
            # give it up, never run this table under it (its generation fences another table).
            self.parts.leases.release(work.lease, now)
            work.lease = None
        if work.lease is None:
            try:
                work.lease = self.parts.leases.acquire(
                    table,
                    self.name,
                    work.id,
                    work.status.attempt,
                    self.config.lease_ttl,
                    self.clock.now(),
                    grace=self.config.grace_seconds,
                )
            except MailboxFileError as exc:
                self.problems.report(str(exc.path), f"{exc}; cannot lease table {table}")
                return
            if work.lease is None:
                return  # another holder's lease still runs: wait for it to run out
            self._check_lease_time(work)
            if work.lease is None:
                return
        # Ownership check, once the lease is held: a request taken over stops here.
        if not self._still_mine(work):
            return
        if table in work.status.tables_done:
            # Our own "done" update landed although its answer was lost: the table is done.
            self.parts.leases.release(work.lease, now)
            work.lease = None
            return
        job = TableJob(
            request=work.id,
            table=table,
            attempt=work.status.attempt,
            fencing_token=work.lease.lease.generation,
            agent=self.name,
            environment=self.mailbox.storage.url,
        )
        work.table_started = now
        try:
            work.run = self.parts.start_table(job)
        except Exception as exc:  # a runner that cannot start fails the table, not the agent
            self._finish_table(work, TableResult(False, f"could not start: {exc}"), now)

    def _finish_table(self, work: Work, result: TableResult, now: datetime) -> None:
        work.run = None
        work.result = result
        held = work.lease
        assert held is not None
        table = held.lease.table
        # Record nothing unless the lease is still ours: a paused agent waking up after a
        # takeover must not log (or count) a table the new owner holds.
        try:
            current = self.parts.leases.current(table)
        except MailboxFileError as exc:
            self.problems.report(str(exc.path), str(exc))
            current = None
        if current is None or current.generation != held.lease.generation:
            if self._still_mine(work):
                self._table_interrupted(work, f"lease on table {table} was taken")
            return
        attempt = work.status.attempt
        # The status update (If-Match) comes first: it proves the request is still ours, and once
        # it lands a crash cannot make another agent run the table again. The run log follows.
        if result.succeeded:

            def done(status: Status) -> None:
                if table not in status.tables_done:
                    status.tables_done.append(table)

            ours = self._update(work, now, done)
        else:
            message = f"table {table} failed: {result.message}"
            ours = self._update(work, now, _finish(State.FAILED, Outcome.FAILED, now, message))
            if ours:
                log.warning("%s: request %s failed: %s", self.name, work.id, message)
                self._release(work)
        if not ours:
            return
        record = RunRecord(
            request=work.id,
            table=table,
            agent=self.name,
            attempt=attempt,
            generation=held.lease.generation,
            started_at=work.table_started or now,
            ended_at=now,
            outcome=Outcome.SUCCEEDED if result.succeeded else Outcome.FAILED,
            message=result.message or None,
        )
        with contextlib.suppress(AlreadyExists):  # this attempt's record may already be there
            self.mailbox.create(run_key(work.id, attempt, table), record)
        self.parts.leases.release(held, now)
        work.lease = None
        work.result = None

    def _update(self, work: Work, now: datetime, change: Callable[[Status], None]) -> bool:
        """Apply ``change`` to the request's status with If-Match; False if it is not ours now.

        An etag mismatch is not always another agent: a write of ours whose answer was lost
        (a store error after it landed) leaves the status changed by us. Only this agent writes
        a status naming it and its attempt, so such a status is built on, not given up.
        """
        for _ in range(3):  # a rebase on our own landed write, then the write itself
            status = copy.deepcopy(work.status)
            change(status)
            status.updated_at = now
            try:
                work.etag = self.mailbox.replace(status_key(work.id), status, work.etag)
            except NotFound:
                self._lost(work, "status removed")
                return False
            except PreconditionFailed:
                current = self._read_status(work.id)
                if current is None or not self._ours(current.value, work.status.attempt):
                    self._lost(work, "status changed by another agent")
                    return False
                work.status, work.etag = current.value, current.etag
                if current.value.state.final:
                    # Our own final write landed; nothing more to change.
                    self._final.add(work.id)
                    self._release(work)
                    return current.value.state is status.state
                continue
            work.status = status
            if status.state.final:
                self._final.add(work.id)
            return True
        self._lost(work, "status keeps changing under this agent")
        return False

    def _lost(self, work: Work, why: str) -> None:
        """The request is no longer ours: stop it and write nothing more for it."""
        log.warning("%s: request %s is no longer mine (%s); stopping it", self.name, work.id, why)
        if work.run is not None:
            work.run.cancel()
            work.run = None
        if work.lease is not None:
            with contextlib.suppress(StorageUnavailable):  # unreleased, it simply runs out
                self.parts.leases.release(work.lease, self.clock.now())
            work.lease = None
        self.held.pop(work.id, None)

    def _release(self, work: Work) -> None:
        self.held.pop(work.id, None)

    def _hand_back(self, work: Work, now: datetime) -> None:
        """While stopping: give a request without a running table back to the pool."""
        if work.run is not None:
            return  # let the table finish within the shutdown grace
        if work.lease is not None:
            self.parts.leases.release(work.lease, now)
            work.lease = None
        status = work.status
        if not status.tables_done and len(status.attempts) <= 1:
            # Nothing done and no history: delete the claim, so any agent (of any version)
            # sees a plain unclaimed request again.
            with contextlib.suppress(PreconditionFailed, NotFound):
                self.mailbox.storage.delete(status_key(work.id), work.etag)
        else:
            self._update(work, now, _hand_back(now))
        log.info("%s: handed request %s back", self.name, work.id)
        self.held.pop(work.id, None)

    # -- looking for work --------------------------------------------------------------------------

    def _scan(self, now: datetime) -> None:
        request_ids = set(self.mailbox.request_ids())
        status_ids = set(self.mailbox.status_ids())
        sweep_due = self._last_sweep is None or now - self._last_sweep >= timedelta(
            seconds=self.config.stale_after
        )
        # Requests already under way (own ones left by an earlier process, lost agents' ones)
        # come before new ones: claimed first, new requests would take the free workers and
        # leave them waiting for as long as new requests keep coming.
        if self.config.take_over or sweep_due:
            self._last_sweep = now
            # Held requests that wait for a worker are looked at too: one this agent held
            # through a pause may have moved meanwhile (and its new holder may be lost now).
            busy = {key for key, work in self.held.items() if work.running or work.run}
            candidates = (status_ids & request_ids) - self._final - busy
            self._sweep(sorted(candidates), now)
        self._claim_unclaimed(sorted(request_ids - status_ids), now)

    def _request(self, request_id: str) -> Request | None:
        cached = self._requests.get(request_id)
        if cached is None:
            key = request_key(request_id)
            found = self.mailbox.read_or_report(Request, key)
            if found is None:
                return None
            if found.value.id != request_id:
                self.problems.report(
                    key, f"{key}: field 'id': {found.value.id!r} does not match the file name"
                )
                return None
            cached = self._requests[request_id] = found.value
        return cached

    def _read_status(self, request_id: str) -> Versioned[Status] | None:
        return self.mailbox.read_or_report(Status, status_key(request_id))

    def _attempt(self, number: int, now: datetime) -> Attempt:
        return Attempt(number=number, agent=self.name, started_at=now, instance=self.instance)

    def _may_hold(self, request: Request) -> bool:
        """A request with an affinity (an unshared schedule's) is for that agent only."""
        return request.affinity is None or request.affinity == self.name

    def _ours(self, status: Status, attempt: int) -> bool:
        """The status names this agent and this attempt (final or not)."""
        return status.agent == self.name and status.attempt == attempt

    def _mine(self, status: Status, attempt: int) -> bool:
        """This agent holds the request in this attempt, and it is not finished."""
        return self._ours(status, attempt) and not status.state.final

    def _claim_unclaimed(self, request_ids: list[str], now: datetime) -> None:
        requests = [r for r in map(self._request, request_ids) if r is not None]
        requests.sort(key=lambda r: (r.created_at, r.id))
        for request in requests:
            if request.deadline is not None and now > request.deadline:
                self._expire(request, now)
                continue
            if not self._may_hold(request):
                continue
            if not self.parts.claim.may_claim(self.load()):
                continue  # keep going: later requests may still need expiring
            status = Status(
                request=request.id,
                state=State.ACCEPTED,
                agent=self.name,
                updated_at=now,
                attempt=1,
                attempts=[self._attempt(1, now)],
            )
            try:
                etag = self.mailbox.create(status_key(request.id), status)
            except AlreadyExists:
                continue  # another agent claimed it first
            log.info("%s: claimed request %s", self.name, request.id)
            self.held[request.id] = Work(request, status, etag)

    def _expire(self, request: Request, now: datetime) -> None:
        status = Status(
            request=request.id,
            state=State.EXPIRED,
            agent=None,
            updated_at=now,
            attempt=0,
            message=f"not claimed before its deadline {request.deadline:%Y-%m-%dT%H:%M:%S}Z",
        )
        with contextlib.suppress(AlreadyExists):
            self.mailbox.create(status_key(request.id), status)
            log.info("%s: request %s expired unclaimed", self.name, request.id)
        self._final.add(request.id)

    def _sweep(self, request_ids: list[str], now: datetime) -> None:
        """Statuses of held-by-nobody-here requests: resume own, pick up released, take over."""
        records: dict[str, AgentRecord | None] = {}
        for request_id in request_ids:
            found = self._read_status(request_id)
            if found is None:
                continue
            status = found.value
            waiting = self.held.get(request_id)
            if waiting is not None:
                if self._mine(status, waiting.status.attempt):
                    waiting.status, waiting.etag = status, found.etag
                    continue
                self._lost(waiting, "status names another agent")
            if status.state.final:
                self._final.add(request_id)
                continue
            holder = status.agent
            if (
                holder == self.name
                and status.attempts[-1:]
                and (status.attempts[-1].instance == self.instance)
            ):
                # This process's own claim or takeover, whose answer a store error lost.
                request = self._request(request_id)
                if request is not None:
                    self.held[request_id] = Work(request, status, found.etag)
                continue
            if holder == self.name:
                reason = "left by an earlier process of this agent"
            elif holder is None:
                reason = "handed back"
            elif self.config.take_over:
                if holder not in records:
                    record = self.mailbox.read_or_report(AgentRecord, agent_key(holder))
                    records[holder] = record.value if record else None
                if not self.parts.takeover.is_lost(records[holder], now, self.config.grace_seconds):
                    continue
                reason = f"agent {holder} is lost"
            else:
                continue
            if not self.parts.claim.may_claim(self.load()):
                return
            self._take_over(found, now, reason, lost=holder is not None)

    def _take_over(self, found: Versioned[Status], now: datetime, reason: str, lost: bool) -> None:
        request = self._request(found.value.request)
        if request is None or not self._may_hold(request):
            return
        status = copy.deepcopy(found.value)
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
            status.agent = self.name
            status.state = State.ACCEPTED
            status.attempts.append(self._attempt(status.attempt, now))
        try:
            etag = self.mailbox.replace(status_key(request.id), status, found.etag)
        except (PreconditionFailed, NotFound):
            return  # another agent moved it first
        if status.state.final:
            self._final.add(request.id)
            log.warning("%s: request %s %s", self.name, request.id, status.message)
            return
        log.info(
            "%s: took over request %s as attempt %d (%s)",
            self.name,
            request.id,
            status.attempt,
            reason,
        )
        self.held[request.id] = Work(request, status, etag)


def _start_attempt(now: datetime) -> Callable[[Status], None]:
    def change(status: Status) -> None:
        status.state = State.RUNNING
        if status.attempts:
            status.attempts[-1].started_at = now

    return change


def _finish(
    state: State, outcome: Outcome, now: datetime, message: str | None = None
) -> Callable[[Status], None]:
    def change(status: Status) -> None:
        status.state = state
        status.message = message
        if status.attempts:
            status.attempts[-1].outcome = outcome
            status.attempts[-1].ended_at = now
            status.attempts[-1].message = message

    return change


def _hand_back(now: datetime) -> Callable[[Status], None]:
    def change(status: Status) -> None:
        status.state = State.ACCEPTED
        status.agent = None
        if status.attempts:
            status.attempts[-1].outcome = Outcome.STOPPED
            status.attempts[-1].ended_at = now

    return change


def _describe_process(record: AgentRecord) -> str:
    return f"host {record.host or '?'}, pid {record.pid or '?'}"
