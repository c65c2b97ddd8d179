"""This agent's own status record, ``agents/<name>.json``: how every other reader knows it lives.

The record is rewritten every ``stale_after / 4`` while the agent holds work, every
``stale_after / 2`` while it holds nothing (at the first poll once that much time has passed
since the last write that landed, or, once ``stale_after / 4`` has passed, before work is taken
within a step: ``Agent.keep_alive``), and at once when it starts saying something new about
the agent's life (it is stopping); each write is ``If-Match`` on the etag this process last
wrote, so a second live process under the same name fails on the etag and stops
(:class:`DuplicateAgent`). Before its first write a process checks the name is free: a live
record of another process, not known to be gone, refuses the start. After a clean stop the last
record carries ``stopped_at``. The other fields (the requests held, the schedules' next due
times) are as of the last write: at most ``stale_after / 4`` plus one poll old while it holds
work (a claim writes it first once it is ``stale_after / 4`` old: ``Agent.keep_alive``).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta

from fdcore import __version__
from fdcore.agent.schedules import Schedule
from fdcore.agent.skew import ClockSkew
from fdcore.agent.work import Holdings
from fdcore.contract.layout import agent_key
from fdcore.contract.limits import HEARTBEAT_SHARE, IDLE_HEARTBEAT_SHARE
from fdcore.contract.models import AgentRecord
from fdcore.errors import (
    AlreadyExists,
    DuplicateAgent,
    FileTooLarge,
    MailboxFileError,
    NotFound,
    PreconditionFailed,
    StorageUnavailable,
    UnreadableFile,
)
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.counting import counted_by_kind
from fdcore.settings.agent_toml import AgentConfig

log = logging.getLogger("fdcore.agent")

#: Whether the process that wrote a record has exited (then its name may be reused at once).
ProcessGone = Callable[[AgentRecord], bool]


class Presence:
    """Writes this agent's status record: every ``stale_after / 4``, and a final one on a clean
    stop."""

    def __init__(
        self,
        config: AgentConfig,
        mailbox: Mailbox,
        instance: str,
        holdings: Holdings,
        schedules: list[Schedule],
        previous_process_gone: ProcessGone,
        *,
        skew: ClockSkew,
    ) -> None:
        self.config = config
        self.agent = config.name
        self.key = agent_key(config.name)
        self.mailbox = mailbox
        self.instance = instance
        self.holdings = holdings
        self.schedules = schedules
        self.previous_process_gone = previous_process_gone
        self.started_at: datetime | None = None
        self.etag: str | None = None  # of the record this process last wrote (or took over)
        self._extra: dict[str, object] = {}  # unknown fields of the record found at start
        self.skew = skew  # measured after each write of the record
        self.written: tuple[datetime, bool] | None = None  # (updated_at, stopping) that landed
        # The store operations earlier processes under this name counted, and since when
        # (from the record found at start): this process's own are added to them.
        self._operations_before: dict[str, int] = {}
        self._operations_since: datetime | None = None

    def heartbeat(self, now: datetime, stopping: bool, *, idle: bool = False) -> None:
        """Write the record if it is due: ``stale_after / 4`` old (``/ 2`` for a poll of an
        agent that holds nothing: ``idle``), or ``stopping`` changed. Any other caller (about
        to take work, say) keeps the ``/ 4`` cadence."""
        if self.written is not None:
            updated_at, was_stopping = self.written
            share = IDLE_HEARTBEAT_SHARE if idle and not self.holdings.work else HEARTBEAT_SHARE
            interval = timedelta(seconds=self.config.stale_after * share)
            at = self._store_time(now)
            # A clock that went back (now < updated_at) writes too: the record must not wait.
            if stopping == was_stopping and updated_at <= at < updated_at + interval:
                return
        self.write(now, stopping)

    def silent(self, now: datetime) -> bool:
        """Whether the record that landed last is older than ``stale_after`` (or none landed):
        the others may judge this agent lost by now, so it takes nothing until it is written
        again (what it took they would take back, each time an attempt lost)."""
        if self.written is None:
            return True
        age = self._store_time(now) - self.written[0]
        return age > timedelta(seconds=self.config.stale_after)

    def write(self, now: datetime, stopping: bool, stopped: bool = False) -> None:
        """Write the record as of ``now``; raise :class:`DuplicateAgent` if another process did.

        Its times are in the store's time once the clock is measured far off it
        (:meth:`ClockSkew.store_time`). The write that finds the offset moved (the first
        measurement of a clock far off) is followed at once by one in the new time: the others
        judge this agent by it, and it takes no lease before it is measured.
        """
        if self.etag is None:
            self.started_at = now
            self._claim_name(now)
        self._write(now, stopping, stopped)
        if self.skew.measure():
            self._write(now, stopping, stopped)
            self.skew.measure()

    def _write(self, now: datetime, stopping: bool, stopped: bool) -> None:
        at = self._store_time(now)
        record = self._record(at, now, stopping, stopped)
        try:
            self.etag = self._put(record, self.etag)
        except (PreconditionFailed, NotFound, AlreadyExists):
            current = self.mailbox.read_or_report(AgentRecord, self.key)
            if current is None or current.value.instance != self.instance:
                other = _describe_process(current.value) if current else "unknown"
                raise DuplicateAgent(
                    f"{self.key} was rewritten by another process ({other}): another agent runs "
                    f"as {self.agent!r}; this one stops"
                ) from None
            # Our own earlier write landed although its answer was lost: write this one on
            # top of it, so the record says we are alive now.
            self.etag = self._put(record, current.etag)
        self.written = (at, stopping)

    def _store_time(self, now: datetime) -> datetime:
        return self.skew.store_time(now)

    def write_final(self, now: datetime, stopping: bool) -> None:
        """After a clean stop: the record with ``stopped_at`` (if the mailbox can be reached)."""
        if self.etag is None:
            return  # never written: nothing says this process ran
        try:
            self.write(now, stopping, stopped=True)
        except StorageUnavailable as exc:
            # Without it the record goes stale and readers judge this agent lost: it holds
            # nothing, so nothing moves.
            log.warning("%s: could not write the final status record: %s", self.agent, exc)

    def _claim_name(self, now: datetime) -> None:
        """Refuse to start while another live process writes this agent's record."""
        try:
            found = self.mailbox.read(AgentRecord, self.key)
        except UnreadableFile:
            # A folder, FIFO or link: nothing this agent can overwrite. Reported by the poll's
            # guard; the agent takes nothing until its record can be written.
            raise
        except MailboxFileError as exc:
            blob = self.mailbox.read_file(self.key)
            self.mailbox.problems.report(self.key, f"{exc}; overwriting it")
            self.etag = blob.etag if blob else None
            return
        if found is None:
            return
        record = found.value
        if record.operations is not None and record.operations_since is not None:
            self._operations_before = dict(record.operations)
            self._operations_since = record.operations_since
        # Judged before this process measured its clock. A writer that measured its clock far
        # off wrote the store's time: it is live by that reading too if our clock is as far off.
        until = record.updated_at + timedelta(seconds=record.stale_after)
        skew = timedelta(seconds=record.clock_skew or 0.0)
        live = now <= until or now - skew <= until
        if (
            live
            and record.instance != self.instance
            and record.stopped_at is None
            and not self.previous_process_gone(record)
        ):
            raise DuplicateAgent(
                f"{self.key}: agent {self.agent!r} is already running "
                f"({_describe_process(record)}, last seen {record.updated_at:%Y-%m-%d %H:%M:%S}Z); "
                f"start it under another name or stop that process"
            )
        self._extra = dict(record.extra)
        self.etag = found.etag

    def _record(self, at: datetime, now: datetime, stopping: bool, stopped: bool) -> AgentRecord:
        """The record as of ``at`` (the store's time, what others judge it by); its schedules'
        next due times by the agent's clock ``now``, which creates their slots."""
        record = AgentRecord(
            name=self.agent,
            updated_at=at,
            stale_after=self.config.stale_after,
            version=__version__,
            instance=self.instance,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=self._store_time(self.started_at) if self.started_at else None,
            concurrency=self.config.concurrency,
            running=self.holdings.running,
            requests=sorted(self.holdings.work),
            claim=self.config.claim,
            take_over=self.config.take_over,
            takeover_policy=self.config.takeover_policy,
            stopping=stopping,
            stopped_at=at if stopped else None,
            schedules=[schedule.published(now) for schedule in self.schedules],
            clock_skew=self.skew.seconds,
            owner=self.config.owner,
            last_jobs=list(self.holdings.last_jobs),
        )
        counted = counted_by_kind(self.mailbox.storage)
        if counted is not None:
            counted.update(self._operations_before)
            record.operations = {kind: n for kind, n in sorted(counted.items()) if n}
            record.operations_since = self._operations_since or record.started_at or at
        record.extra = dict(self._extra)
        return record

    def _put(self, record: AgentRecord, etag: str | None) -> str:
        """Create or replace (If-Match ``etag``) the record; its new etag.

        Within the size bound: the held requests' ids and the last jobs are for people
        (``fdcore agents``) and are left out if the record would not fit with them (the count
        stays in ``running``).
        Past the bound with its schedules alone, FileTooLarge: the agent, which cannot say it is
        alive, takes nothing new.
        """
        try:
            if etag is None:
                return self.mailbox.create(self.key, record)
            return self.mailbox.replace(self.key, record, etag)
        except FileTooLarge:
            if not record.requests and not record.last_jobs:
                raise
            record.requests, record.last_jobs = [], None
            return self._put(record, etag)


def _describe_process(record: AgentRecord) -> str:
    return f"host {record.host or '?'}, pid {record.pid or '?'}"
