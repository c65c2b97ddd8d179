"""``AsyncEnvironment``: :class:`~fdcore.environment.client.Environment` for asyncio code
(an orchestrator's deferrable task, a web handler), never blocking the event loop.

Each store call runs in a worker thread (:func:`asyncio.to_thread`); a wait and ``changes()``
pause on the loop (an :class:`asyncio.Event` the store's watch sets from its thread, or a
timeout of ``poll`` seconds), so a thousand waits hold no thread while they wait. The looks are
the synchronous face's own (:class:`~fdcore.environment.wait.RequestWait`,
:class:`~fdcore.environment.changes.ChangeTracker`): one logic, two faces.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType

from fdcore.contract.ids import validate_id
from fdcore.contract.layout import REQUESTS, STATUS
from fdcore.contract.models import Incident, RunRecord
from fdcore.environment.changes import Change, ChangeTracker
from fdcore.environment.client import (
    DEFAULT_GRACE,
    DEFAULT_POLL,
    STOP_LOOK,
    Environment,
    Handle,
)
from fdcore.environment.cost import CostReport
from fdcore.environment.queue import QueueFilter, QueuePage
from fdcore.environment.views import AgentRow, QueueRow, RequestStory, ScheduleRow
from fdcore.environment.wait import RequestWait
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.audit import AuditPage
from fdcore.mailbox.cancel import Cancellation
from fdcore.mailbox.index import MailboxIndex

__all__ = ["AsyncEnvironment", "AsyncRequestHandle"]


class _LoopEvent:
    """An :class:`asyncio.Event` that the store's watch thread may set."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def set_from_thread(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            self._loop.call_soon_threadsafe(self.event.set)

    async def wait(self, seconds: float, stopped: Callable[[], bool] | None = None) -> None:
        """Until set, ``seconds`` passed or ``stopped()`` says so (looked at every
        :data:`STOP_LOOK` seconds, only when given); then cleared."""
        end = time.monotonic() + seconds
        while stopped is None or not stopped():
            left = end - time.monotonic()
            if left <= 0:
                break
            step = left if stopped is None else min(left, STOP_LOOK)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.event.wait(), step)
                break
            if stopped is None:
                break
        self.event.clear()


class AsyncEnvironment:
    """An :class:`~fdcore.environment.Environment` whose methods are coroutines that never
    block the event loop; ``changes()`` is an async iterator. Each returns and raises what the
    synchronous method of the same name does."""

    def __init__(self, environment: Environment) -> None:
        """Wrap an open :class:`~fdcore.environment.Environment` (see :meth:`open`)."""
        self.environment = environment

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        config: str | os.PathLike[str] | None = None,
        create: bool = False,
        max_file_bytes: int | None = None,
        poll: float = DEFAULT_POLL,
        **storage_options: str,
    ) -> AsyncEnvironment:
        """Open the environment at ``url`` (:meth:`Environment.open
        <fdcore.environment.Environment.open>`, in a worker thread)."""

        def opened() -> Environment:
            return Environment.open(
                url,
                config=config,
                create=create,
                max_file_bytes=max_file_bytes,
                poll=poll,
                **storage_options,
            )

        return cls(await asyncio.to_thread(opened))

    @property
    def url(self) -> str:
        return self.environment.url

    @property
    def mailbox(self) -> Mailbox:
        return self.environment.mailbox

    async def close(self) -> None:
        """Stop its watches and close the store; a wait under way raises EnvironmentClosed."""
        await asyncio.to_thread(self.environment.close)

    async def __aenter__(self) -> AsyncEnvironment:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncEnvironment({self.url!r})"

    async def submit(
        self,
        entities: str | Sequence[str],
        *,
        id: str | None = None,
        deadline: datetime | timedelta | None = None,
        max_attempts: int | None = None,
        created_by: str = "python",
        actor: str | None = None,
    ) -> AsyncRequestHandle:
        """Queue a request (:meth:`Environment.submit <fdcore.environment.Environment.submit>`,
        idempotent under an ``id``); return its handle."""
        handle = await asyncio.to_thread(
            self.environment.submit,
            entities,
            id=id,
            deadline=deadline,
            max_attempts=max_attempts,
            created_by=created_by,
            actor=actor,
        )
        return AsyncRequestHandle(self, handle.id, handle.request)

    async def request(self, id: str) -> RequestStory:
        """The request's whole story; RequestNotFound if there is no such request."""
        return await asyncio.to_thread(self.environment.request, id)

    async def wait(
        self,
        id: str,
        timeout: float | None = None,
        *,
        progress: Callable[[RequestStory], None] | None = None,
    ) -> RequestStory:
        """Wait until the request ends, pausing on the event loop (:meth:`Environment.wait
        <fdcore.environment.Environment.wait>`): its final story if it succeeded; raises
        RequestFailed, RequestExpired, RequestCancelled or WaitTimedOut otherwise,
        EnvironmentClosed once :meth:`close` was called, and RequestNotFound for an unknown
        request. ``progress`` is called on the loop."""
        wait = RequestWait(
            self.mailbox, validate_id(id, "request id"), timeout, self.environment.closed
        )
        woken = _LoopEvent()
        stop_listening = self.environment.watch.listen(STATUS, woken.set_from_thread)
        try:
            await asyncio.to_thread(wait.start)
            while True:
                if progress is not None and wait.story is not None and wait.reported():
                    progress(wait.story)
                if wait.over():
                    return wait.outcome()
                await woken.wait(
                    wait.pause(self.environment.watch.pause(STATUS, self.environment.poll))
                )
                await asyncio.to_thread(wait.next_look)
        finally:
            stop_listening()

    def handle(self, id: str) -> AsyncRequestHandle:
        """The handle of request ``id`` (reads nothing)."""
        return AsyncRequestHandle(self, validate_id(id, "request id"))

    async def cancel(
        self, id: str, *, by: str | None = None, reason: str | None = None
    ) -> Cancellation:
        """Cancel the request (:meth:`Environment.cancel
        <fdcore.environment.Environment.cancel>`)."""
        return await asyncio.to_thread(self.environment.cancel, id, by=by, reason=reason)

    async def retry(
        self,
        id: str,
        *,
        id_of_retry: str | None = None,
        by: str | None = None,
        from_table: str | None = None,
    ) -> AsyncRequestHandle:
        """Run an ended request again as a new one (:meth:`Environment.retry
        <fdcore.environment.Environment.retry>`); return the new one's handle."""
        handle = await asyncio.to_thread(
            self.environment.retry, id, id_of_retry=id_of_retry, by=by, from_table=from_table
        )
        return AsyncRequestHandle(self, handle.id, handle.request)

    async def queue(
        self,
        where: QueueFilter | None = None,
        *,
        offset: int = 0,
        limit: int | None = None,
        include_archived: bool = False,
    ) -> QueuePage:
        """One page of the queue (:meth:`Environment.queue
        <fdcore.environment.Environment.queue>`)."""
        return await asyncio.to_thread(
            self.environment.queue,
            where,
            offset=offset,
            limit=limit,
            include_archived=include_archived,
        )

    async def table_runs(self, id: str) -> list[RunRecord]:
        """The run records of live request ``id`` (see :meth:`Environment.table_runs`)."""
        return await asyncio.to_thread(self.environment.table_runs, id)

    async def agents(
        self, *, grace: float = DEFAULT_GRACE, queue: Sequence[QueueRow] | None = None
    ) -> list[AgentRow]:
        """Every agent's row, by name (:meth:`Environment.agents
        <fdcore.environment.Environment.agents>`)."""
        return await asyncio.to_thread(self.environment.agents, grace=grace, queue=queue)

    async def schedules(self, *, grace: float = DEFAULT_GRACE) -> list[ScheduleRow]:
        """Every schedule the agents hold, by id."""
        return await asyncio.to_thread(self.environment.schedules, grace=grace)

    async def incidents(self, *, include_resolved: bool = True) -> list[Incident]:
        """The open incidents, then (with ``include_resolved``) the resolved ones."""
        return await asyncio.to_thread(
            self.environment.incidents, include_resolved=include_resolved
        )

    async def audit(
        self,
        *,
        since: datetime | None = None,
        request: str | None = None,
        limit: int | None = None,
        archived: bool = False,
    ) -> AuditPage:
        """The audit trail (:meth:`Environment.audit <fdcore.environment.Environment.audit>`)."""
        return await asyncio.to_thread(
            self.environment.audit, since=since, request=request, limit=limit, archived=archived
        )

    async def cost(
        self,
        *,
        by: str = "request",
        since: datetime | None = None,
        request: str | None = None,
        store: str | None = None,
        prices: Mapping[str, Mapping[str, float]] | None = None,
    ) -> CostReport:
        """What the table runs cost (:meth:`Environment.cost
        <fdcore.environment.Environment.cost>`)."""
        return await asyncio.to_thread(
            self.environment.cost, by=by, since=since, request=request, store=store, prices=prices
        )

    async def acknowledge(self, incident: str, *, by: str) -> Incident:
        """Acknowledge an open incident; ConfigError if there is none of that id or key."""
        return await asyncio.to_thread(self.environment.acknowledge, incident, by=by)

    async def changes(
        self, *, stop: asyncio.Event | threading.Event | None = None
    ) -> AsyncIterator[Change]:
        """The requests' state changes as they land (:meth:`Environment.changes
        <fdcore.environment.Environment.changes>`), from the first iteration on, until
        ``stop`` is set or the environment is closed (seen within a twentieth of a second)."""
        environment = self.environment
        tracker = ChangeTracker(MailboxIndex(self.mailbox))
        woken = _LoopEvent()
        listening = [
            environment.watch.listen(prefix, woken.set_from_thread) for prefix in (REQUESTS, STATUS)
        ]

        def stopped() -> bool:
            return environment.closed.is_set() or (stop is not None and stop.is_set())

        try:
            await asyncio.to_thread(tracker.look)  # where changes start
            while not stopped():
                await woken.wait(environment.watch.pause(STATUS, environment.poll), stopped)
                if stopped():
                    return
                try:
                    found = await asyncio.to_thread(tracker.look)
                except StorageUnavailable:
                    continue  # the next look finds what this one missed
                for change in found:
                    yield change
        finally:
            for stop_listening in listening:
                stop_listening()


class AsyncRequestHandle(Handle[AsyncEnvironment]):
    """One request of an :class:`AsyncEnvironment`, as its ``submit`` and ``retry`` return
    it: ``id``, ``environment`` and ``request`` (None for ``handle(id)``'s)."""

    async def story(self) -> RequestStory:
        """The request's whole story now."""
        return await self.environment.request(self.id)

    async def wait(
        self,
        timeout: float | None = None,
        *,
        progress: Callable[[RequestStory], None] | None = None,
    ) -> RequestStory:
        """Wait until the request ends (:meth:`AsyncEnvironment.wait`)."""
        return await self.environment.wait(self.id, timeout, progress=progress)

    async def cancel(self, *, by: str | None = None, reason: str | None = None) -> Cancellation:
        """Cancel the request."""
        return await self.environment.cancel(self.id, by=by, reason=reason)
