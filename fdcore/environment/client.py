"""``fdcore.Environment``: an environment driven from code, the one face the commands and the
monitor are built on (docs/python.md).

It keeps what repeated looks share: the mailbox (one store handle), one
:class:`~fdcore.environment.queue.QueueReader` whose index reads again only what changed
(client-go's shared informer cache), and one watch of the store where it can watch. Its methods
are the operator's: submit, read a request's story, wait for it to end, cancel, retry, list the
queue, agents, schedules and incidents, and follow state changes as they land.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import Generic, TypeVar

from fdcore.contract.ids import is_valid_id, validate_id
from fdcore.contract.layout import REQUESTS, STATUS
from fdcore.contract.models import (
    AUDIT_ACTIONS,
    AUDIT_ORIGINS,
    MAX_AUDIT_TEXT,
    Incident,
    Request,
    RunRecord,
)
from fdcore.environment.actions import (
    acknowledge_incident,
    incidents,
    open_mailbox,
    operator_name,
)
from fdcore.environment.changes import Change, ChangeTracker
from fdcore.environment.cost import CostedRun, CostReport, cost_report, runs_of
from fdcore.environment.queue import QueueFilter, QueuePage, QueueReader, queue_page
from fdcore.environment.views import (
    AgentRow,
    QueueRow,
    RequestStory,
    ScheduleRow,
    agent_rows,
    request_story,
    schedule_rows,
)
from fdcore.environment.wait import RequestWait
from fdcore.environment.watch import StoreWatch
from fdcore.errors import FdcoreError, InvalidId, RequestError, StorageUnavailable
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import find_request_files
from fdcore.mailbox.audit import AuditLog, AuditPage, record
from fdcore.mailbox.cancel import Cancellation, cancel_request
from fdcore.mailbox.index import MailboxIndex
from fdcore.mailbox.submit import deadline_from, retry_request, submit
from fdcore.mailbox.verdict import AgentVerdicts
from fdcore.pricing import store_of
from fdcore.settings.agent_toml import PipelineTable
from fdcore.settings.checks import GRACE
from fdcore.settings.declare import check_of

__all__ = ["DEFAULT_GRACE", "DEFAULT_POLL", "Environment", "RequestHandle"]

#: Seconds between two reads of a waited request's status where the store cannot watch (and,
#: where it can, the longest a wait trusts the watch alone).
DEFAULT_POLL = 1.0
#: Seconds past an agent's ``stale_after`` before it counts as lost (the commands' ``--grace``).
DEFAULT_GRACE: float = GRACE.default
#: How often a pause of ``changes()`` looks at its ``stop`` and at the environment's closing
#: (seconds): a stop ends it this soon, at no cost to the store.
STOP_LOOK = 0.05


def pause(woken: threading.Event, seconds: float, stopped: Callable[[], bool]) -> None:
    """Until ``woken`` is set, ``seconds`` passed or ``stopped()`` says so; ``woken`` cleared."""
    end = time.monotonic() + seconds
    while not stopped():
        left = end - time.monotonic()
        if left <= 0 or woken.wait(min(left, STOP_LOOK)):
            break
    woken.clear()


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Environment:
    """One environment (a mailbox in storage) as code drives it.

    Open one with :meth:`open` and close it (or use it as a context manager). It is safe to
    share between threads; its look at the queue is shared by every caller.
    """

    def __init__(
        self, mailbox: Mailbox, *, poll: float = DEFAULT_POLL, via: str = "python"
    ) -> None:
        """Wrap an open ``mailbox`` (see :meth:`open` for the usual way in); ``poll`` is the
        seconds between two reads of a waited request's status where the store cannot watch;
        ``via`` is where its actions come from in the audit trail: ``python`` (the default),
        ``cli`` or ``monitor``."""
        if not poll > 0:
            raise ValueError(f"poll must be a positive number of seconds, got {poll!r}")
        if via not in AUDIT_ORIGINS or via == "agent":
            raise ValueError(f"via must be python, cli or monitor, got {via!r}")
        self.via = via
        self.mailbox = mailbox
        self.url: str = mailbox.storage.url
        self.poll = float(poll)
        self.closed = threading.Event()  # set by close(): ends its watches, waits and changes()
        self._queue = QueueReader(mailbox)
        self.watch = StoreWatch(mailbox.storage, self.closed)  # one watch per folder, shared
        self._verdicts = AgentVerdicts()  # the takeover policies, looked up once
        self._audit = AuditLog(mailbox)  # its reads of the trail, each event read once

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        config: str | os.PathLike[str] | None = None,
        create: bool = False,
        max_file_bytes: int | None = None,
        poll: float = DEFAULT_POLL,
        via: str = "python",
        **storage_options: str,
    ) -> Environment:
        """Open the environment at ``url`` through its installed storage plugin, with the
        store's ``storage_options`` (its ``[storage]`` settings) and reads bounded by
        ``max_file_bytes`` (default: ``$FDCORE_MAX_FILE_BYTES``, else 1 MiB).

        ``url`` may instead name an environment of the user's environments file
        (``$FDCORE_ENVIRONMENTS``, else ``$XDG_CONFIG_HOME/fdcore/environments.toml``), or
        ``config`` give an agent.toml whose ``[agent] environment`` and ``[storage]`` to use;
        ``storage_options`` given here win over theirs.

        Raises :class:`~fdcore.errors.EnvironmentNotFound` if there is none there and not
        ``create``; :class:`~fdcore.errors.PluginError` if no installed plugin opens the URL;
        :class:`~fdcore.errors.ConfigError` for an unreadable environments file or agent.toml;
        :class:`~fdcore.errors.StorageUnavailable` if the store cannot be reached.
        """
        mailbox = open_mailbox(
            url,
            create=create,
            max_file_bytes=max_file_bytes,
            options=dict(storage_options),
            config=config,
        )
        return cls(mailbox, poll=poll, via=via)

    def close(self) -> None:
        """Stop its watches and close the store; it is not used afterwards. A wait or
        ``changes()`` under way in another thread ends: the wait raises
        :class:`~fdcore.errors.EnvironmentClosed`, ``changes()`` stops."""
        if not self.closed.is_set():
            self.closed.set()
            self.watch.wake_all()  # a wait in another thread ends now: EnvironmentClosed
            self.mailbox.storage.close()

    def __enter__(self) -> Environment:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Environment({self.url!r})"

    # -- requests ------------------------------------------------------------------------------

    def submit(
        self,
        entities: str | Sequence[str],
        *,
        id: str | None = None,
        deadline: datetime | timedelta | None = None,
        max_attempts: int | None = None,
        created_by: str = "python",
        actor: str | None = None,
    ) -> RequestHandle:
        """Queue a request running the tables ``entities`` in order; return its handle. One
        table may be given by its name alone: ``submit("sales")`` is ``submit(["sales"])``.

        The audit trail records the submit as done by ``actor`` (default ``user@host``).

        Idempotent with an ``id``: if a request of that id exists (live or archived) and names
        the same work, its handle is returned and nothing is queued again (a retry after a lost
        answer). Raises :class:`~fdcore.errors.RequestError` if that id names other work, or if
        the request could not run through within the mailbox's size bound;
        :class:`~fdcore.errors.InvalidId` for a bad table name or id;
        :class:`~fdcore.errors.RequestError` for a ``deadline`` (a time, or a ``timedelta``
        from now) without a time zone or not in the future;
        :class:`~fdcore.errors.ConfigError` for ``max_attempts`` out of range;
        :class:`~fdcore.errors.StorageUnavailable` if the store did not answer (submitting again
        with the same ``id`` is then safe).
        """
        if isinstance(entities, str):
            entities = [entities]  # one table by its name, not a sequence of letters
        tables = [validate_id(table, "table name") for table in entities]
        if not tables:
            raise InvalidId("entities: a request names at least one table", "entities")
        if id is not None:
            validate_id(id, "request id")
        if deadline is not None:
            try:
                deadline_from(deadline, _now())  # in the future; a duration stays one
            except ValueError as exc:
                raise RequestError(f"deadline {exc}") from None
        if max_attempts is not None:
            check_of(PipelineTable, "max_attempts").bind(
                "Environment.submit", "max_attempts"
            ).check(max_attempts)
        who = _actor(actor)
        now = _now()

        def act() -> Request:
            return submit(
                self.mailbox,
                tables,
                request_id=id,
                max_attempts=max_attempts,
                deadline=deadline,
                now=now,
                created_by=created_by,
            )

        request = self._acted(
            "submit",
            id,
            who,
            act,
            lambda made: (made.id, "ok" if made.created_at == now else "exists"),
            detail=f"tables {','.join(tables)}",
        )
        return RequestHandle(self, request.id, request)

    def request(self, id: str) -> RequestStory:
        """The whole story of request ``id`` (what ``fdcore show`` prints): its tables,
        attempts, table runs with their output tails, cancel and retry links, how it ended;
        live or archived by retention.

        Raises :class:`~fdcore.errors.RequestNotFound` if there is no such request,
        :class:`~fdcore.errors.InvalidId` for a malformed id,
        :class:`~fdcore.errors.MailboxFileError` if one of its files is malformed.
        """
        return request_story(self.mailbox, validate_id(id, "request id"))

    def wait(
        self,
        id: str,
        timeout: float | None = None,
        *,
        progress: Callable[[RequestStory], None] | None = None,
    ) -> RequestStory:
        """Wait until request ``id`` ends; return its final story if it succeeded.

        ``timeout`` is in seconds (None: as long as it takes); ``progress`` is called with the
        story first and again each time it changes (state, holder, a table done), from the
        calling thread, the final story once. Where the store can watch (a local folder) the
        wait wakes as the status lands; elsewhere it reads the request's status file every
        ``poll`` seconds (and only that file, while it is unchanged). A malformed or hostile
        status file, or the store briefly unavailable, does not end the wait: it waits on,
        within ``timeout``.

        Raises :class:`~fdcore.errors.RequestFailed`, :class:`~fdcore.errors.RequestExpired` or
        :class:`~fdcore.errors.RequestCancelled` (each with ``.story``) if it ended otherwise;
        :class:`~fdcore.errors.WaitTimedOut` if it had not ended after ``timeout`` seconds (the
        request goes on); :class:`~fdcore.errors.EnvironmentClosed` if :meth:`close` was called,
        from any thread, before it ended (at once: it pauses no longer);
        :class:`~fdcore.errors.RequestNotFound` if there is no such request; ``ValueError`` for a
        negative or NaN ``timeout``.
        """
        wait = RequestWait(self.mailbox, validate_id(id, "request id"), timeout, self.closed)
        woken = threading.Event()
        stop_listening = self.watch.listen(STATUS, woken.set)  # before the first look
        try:
            wait.start()
            while True:
                if progress is not None and wait.story is not None and wait.reported():
                    progress(wait.story)
                if wait.over():
                    return wait.outcome()
                woken.wait(wait.pause(self.watch.pause(STATUS, self.poll)))
                woken.clear()
                wait.next_look()
        finally:
            stop_listening()

    def handle(self, id: str) -> RequestHandle:
        """The handle of request ``id`` (read nothing: :meth:`RequestHandle.story` does)."""
        return RequestHandle(self, validate_id(id, "request id"))

    def cancel(self, id: str, *, by: str | None = None, reason: str | None = None) -> Cancellation:
        """Cancel request ``id`` as ``by`` (default ``user@host``): unclaimed it ends
        ``cancelled`` now, held its holder stops it at its next poll. Cancelling twice returns
        the first cancel (``created`` False).

        Raises :class:`~fdcore.errors.RequestNotFound`, or :class:`~fdcore.errors.RequestError`
        if it already ended.
        """
        request_id, who = validate_id(id, "request id"), _actor(by)
        return self._acted(
            "cancel",
            request_id,
            who,
            lambda: cancel_request(self.mailbox, request_id, by=who, reason=reason, now=_now()),
            lambda done: (request_id, done.state if done.created else "already cancelled"),
            detail=reason,
        )

    def retry(
        self,
        id: str,
        *,
        id_of_retry: str | None = None,
        by: str | None = None,
        from_table: str | None = None,
    ) -> RequestHandle:
        """Run the failed, expired or cancelled request ``id`` again as a new request (from
        ``from_table`` on, if given) under ``id_of_retry`` (default: generated); return its
        handle. Retrying again with the same ``id_of_retry`` returns the same retry.

        Raises :class:`~fdcore.errors.RequestNotFound`, or :class:`~fdcore.errors.RequestError`
        if it has not ended, succeeded, was already retried (as another id), or has no table
        ``from_table``.
        """
        if id_of_retry is not None:
            validate_id(id_of_retry, "request id")
        request_id, who = validate_id(id, "request id"), _actor(by)
        retry = self._acted(
            "retry",
            request_id,
            who,
            lambda: retry_request(
                self.mailbox,
                request_id,
                from_table=from_table,
                by=who,
                now=_now(),
                retry_id=id_of_retry,
            ),
            lambda made: (request_id, f"ok: {made.id}"),
            detail=None if from_table is None else f"from table {from_table}",
        )
        return RequestHandle(self, retry.id, retry)

    def changes(self, *, stop: threading.Event | None = None) -> Iterator[Change]:
        """The requests' state changes from now on, as they land: a :class:`Change` each time a
        request is submitted or its status changes state, oldest first, until ``stop`` is set
        or the environment is closed (either ends it within a twentieth of a second). The
        current states are :meth:`queue`'s.

        Each look reads only what changed (a mailbox index of its own); where the store can
        watch, a look follows each change at once, elsewhere one comes every ``poll`` seconds
        (a request that changed twice in between shows its latest state). A store briefly
        unavailable delays changes, never loses them. Raises
        :class:`~fdcore.errors.StorageUnavailable` only if the first look (made by this call)
        cannot be made.
        """
        tracker = ChangeTracker(MailboxIndex(self.mailbox))
        woken = threading.Event()
        listening = [self.watch.listen(prefix, woken.set) for prefix in (REQUESTS, STATUS)]
        try:
            tracker.look()  # where changes start: now, not at the first next()
        except BaseException:
            for stop_listening in listening:
                stop_listening()
            raise
        return self._changes(tracker, woken, listening, stop or threading.Event())

    def _changes(
        self,
        tracker: ChangeTracker,
        woken: threading.Event,
        listening: list[Callable[[], None]],
        stop: threading.Event,
    ) -> Iterator[Change]:
        try:

            def stopped() -> bool:
                return stop.is_set() or self.closed.is_set()

            while not stopped():
                pause(woken, self.watch.pause(STATUS, self.poll), stopped)
                if stopped():
                    return
                try:
                    found = tracker.look()
                except StorageUnavailable:
                    continue  # the next look finds what this one missed
                yield from found
        finally:
            for stop_listening in listening:
                stop_listening()

    # -- what the environment holds ------------------------------------------------------------

    def queue(
        self,
        where: QueueFilter | None = None,
        *,
        offset: int = 0,
        limit: int | None = None,
        include_archived: bool = False,
    ) -> QueuePage:
        """One page of the queue: the requests ``where`` selects (default: all), newest first,
        ``limit`` of them (default: all) from ``offset``, with the counts by state. With
        ``include_archived``, requests retention archived too.

        Each call lists the mailbox and reads only what changed since the last (one look kept
        by the environment). Raises :class:`~fdcore.errors.StorageUnavailable`; a malformed
        file is a row in state ``unreadable``, never an error.
        """
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        rows = self._queue.rows(include_archived=include_archived)
        return queue_page(rows, where or QueueFilter(), offset, limit or max(len(rows), 1))

    def table_runs(self, id: str) -> list[RunRecord]:
        """The run records of live request ``id`` (its tables' outcomes and times, without the
        rest of its story): one listing, each record read once while it stays listed (the
        queue's look keeps them). A malformed record is left out and reported once; none for an
        unknown id. Raises :class:`~fdcore.errors.InvalidId`,
        :class:`~fdcore.errors.StorageUnavailable`."""
        records, _ = self._queue.index.runs(validate_id(id, "request id"))
        return records

    def cost(
        self,
        *,
        by: str = "request",
        since: datetime | None = None,
        request: str | None = None,
        store: str | None = None,
        prices: Mapping[str, Mapping[str, float]] | None = None,
    ) -> CostReport:
        """What the table runs cost (what ``fdcore cost`` prints): their store operations and
        wall time, priced and grouped ``by`` run, request, schedule, owner or agent, most
        expensive first; only runs ended at or after ``since``, or only ``request``'s runs
        (live or archived). Without either, a last row ``not in any run`` holds what the
        agents did outside every run (polls, heartbeats, claims), so the rows add up to what
        the agents paid. Store operations are priced at ``prices[store]`` (default: the
        built-in tables, :data:`fdcore.pricing.PRICES`; ``store`` defaults to the one the
        environment's URL names, and a local folder's are not priced), wall time at each
        run's agent's ``compute_per_hour``.

        Raises ValueError for an unknown ``by`` or ``store`` or a ``since`` without a time
        zone; :class:`~fdcore.errors.InvalidId`, :class:`~fdcore.errors.StorageUnavailable`."""
        chosen = store or store_of(self.url)
        if since is not None and since.utcoffset() is None:
            raise ValueError(f"since {since.isoformat()} has no time zone: give one")
        runs: Iterable[CostedRun]
        if request is not None:
            files = find_request_files(self.mailbox, validate_id(request, "request id"))
            schedule = files.request.schedule if files and files.request else None
            found = files.runs if files is not None else ()
            runs = [CostedRun(request, schedule.id if schedule else None, r) for r in found]
        else:
            runs = runs_of(self.mailbox, self._queue.rows(include_archived=True), self.table_runs)
        return cost_report(
            self.mailbox,
            runs,
            by=by,
            store=chosen,
            prices=prices,
            since=since,
            whole_fleet=request is None,
        )

    @property
    def lost_agents_unknown(self) -> str | None:
        """Why some agents are never shown ``lost`` (the takeover policy their records name is
        not installed here), as the agents read so far found; else None."""
        return "; ".join(sorted(self._verdicts.problems.values())) or None

    def agents(
        self, *, grace: float = DEFAULT_GRACE, queue: Sequence[QueueRow] | None = None
    ) -> list[AgentRow]:
        """Every agent's row (live, stale, lost, stopped or unreadable), by name; an agent is
        lost ``grace`` seconds past its ``stale_after``. Its ``running`` and ``requests`` are
        what the requests' statuses say it holds now, not its record's figures, which are as
        old as its last heartbeat: read by a look at the queue, or taken from ``queue``, the
        rows of a look just made (``queue().rows``, unfiltered), to spare a second one. Raises
        :class:`~fdcore.errors.StorageUnavailable`."""
        rows = self._queue.rows(include_final=False) if queue is None else queue
        return agent_rows(self.mailbox, _now(), self._verdicts, grace, rows)

    def schedules(self, *, grace: float = DEFAULT_GRACE) -> list[ScheduleRow]:
        """Every schedule the agents (not stopped) hold, by id, with when it is next due and
        who serves it. Raises :class:`~fdcore.errors.StorageUnavailable`."""
        # the records alone: a schedule's row needs no request's status
        return schedule_rows(agent_rows(self.mailbox, _now(), self._verdicts, grace))

    def incidents(self, *, include_resolved: bool = True) -> list[Incident]:
        """The open incidents, then (with ``include_resolved``) the resolved ones, newest
        first. Raises :class:`~fdcore.errors.StorageUnavailable`."""
        return incidents(self.mailbox, include_resolved)

    def acknowledge(self, incident: str, *, by: str) -> Incident:
        """Acknowledge the open incident with id or key ``incident`` as ``by``; return it.
        Raises :class:`~fdcore.errors.ConfigError` if no open incident has that id or key."""
        who = _actor(by)
        return self._acted(
            "acknowledge",
            incident,
            who,
            lambda: acknowledge_incident(self.mailbox, incident, _now(), who),
            lambda done: (None, f"ok: {done.id}"),
        )

    def record_action(
        self,
        action: str,
        subject: str,
        *,
        actor: str | None = None,
        outcome: str = "ok",
        detail: str | None = None,
    ) -> None:
        """Record one workload action done outside the mailbox (a host's slot change,
        ``set-slots``) in the audit trail, as ``actor`` (default ``user@host``). Raises
        ValueError for an action the trail does not know or a bad actor."""
        if action not in AUDIT_ACTIONS:
            raise ValueError(f"action must be one of {', '.join(AUDIT_ACTIONS)}, got {action!r}")
        self._record(action, subject, _actor(actor), outcome, None, detail)

    def audit(
        self,
        *,
        since: datetime | None = None,
        request: str | None = None,
        limit: int | None = None,
        archived: bool = False,
    ) -> AuditPage:
        """The audit trail (what ``fdcore audit`` prints): one row per workload action at or
        after ``since``, about ``request`` if given, the newest ``limit`` (default all), oldest
        first. A row that is not ``trusted`` (malformed, oversized, or its times or origin do
        not add up) says why in ``problems``. Retention archives events older than its keep:
        ``archived`` (with ``since``) reads those too, one listing per day since ``since``.
        Raises :class:`~fdcore.errors.StorageUnavailable`, :class:`~fdcore.errors.InvalidId`,
        ValueError for ``archived`` without ``since``."""
        if request is not None:
            validate_id(request, "request id")
        if since is not None and since.utcoffset() is None:
            raise ValueError(f"since {since.isoformat()} has no time zone: give one")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        return self._audit.read(since=since, request=request, limit=limit, archived=archived)

    def _acted(
        self,
        action: str,
        subject: str | None,
        who: str,
        act: Callable[[], T],
        outcome: Callable[[T], tuple[str | None, str]],
        *,
        detail: str | None = None,
    ) -> T:
        """Do ``act()`` and record it in the audit trail, one event: done (``outcome`` gives the
        request it was about and how it ended) or refused by the mailbox (its reason). A store
        that did not answer records nothing: nothing is known to have happened."""
        try:
            result = act()
        except StorageUnavailable:
            raise
        except FdcoreError as exc:
            self._record(action, subject, who, f"refused: {exc}", subject, detail)
            raise
        request, how = outcome(result)
        self._record(action, request or subject, who, how, request or subject, detail)
        return result

    def _record(
        self,
        action: str,
        subject: str | None,
        who: str,
        outcome: str,
        request: str | None,
        detail: str | None,
    ) -> None:
        about = request if action != "acknowledge" else None
        record(
            self.mailbox,
            action,
            subject or "-",
            actor=who,
            via=self.via,
            at=_now(),
            outcome=outcome,
            request=about if about is not None and is_valid_id(about) else None,
            detail=detail,
        )


E = TypeVar("E")
T = TypeVar("T")


def _actor(given: str | None) -> str:
    """Who acts: ``given`` (one printable line), else ``user@host``."""
    if given is None:
        return operator_name()
    if not isinstance(given, str) or not given.strip():
        raise ValueError(f"actor must be a non-empty string, got {given!r}")
    if len(given) > MAX_AUDIT_TEXT or not given.isprintable():
        raise ValueError(f"actor must be one printable line of at most {MAX_AUDIT_TEXT} characters")
    return given


class Handle(Generic[E]):
    """What a request's handle is, whichever environment (sync or asyncio) it belongs to."""

    def __init__(self, environment: E, id: str, request: Request | None = None) -> None:
        self.environment = environment
        self.id = id
        #: The request as submitted (or as it stood, for a submission repeated under its id);
        #: None for a handle made from an id (``environment.handle(id)``).
        self.request = request

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Handle)
        return self.id == other.id and self.environment is other.environment

    def __hash__(self) -> int:
        return hash(self.id)


class RequestHandle(Handle[Environment]):
    """One request of an :class:`Environment`, as :meth:`Environment.submit` and
    :meth:`Environment.retry` return it (Temporal's workflow handle): ``id``, ``environment``
    and ``request`` (the request as submitted; None for :meth:`Environment.handle`'s)."""

    def story(self) -> RequestStory:
        """The request's whole story now (:meth:`Environment.request`)."""
        return self.environment.request(self.id)

    def wait(
        self,
        timeout: float | None = None,
        *,
        progress: Callable[[RequestStory], None] | None = None,
    ) -> RequestStory:
        """Wait until the request ends (:meth:`Environment.wait`): its final story if it
        succeeded; RequestFailed, RequestExpired, RequestCancelled or WaitTimedOut otherwise."""
        return self.environment.wait(self.id, timeout, progress=progress)

    def cancel(self, *, by: str | None = None, reason: str | None = None) -> Cancellation:
        """Cancel the request (:meth:`Environment.cancel`)."""
        return self.environment.cancel(self.id, by=by, reason=reason)
