"""What an agent holds: each request it claimed or took over (:class:`Work`), in :class:`Holdings`.

Every part of the agent (:mod:`.presence`, :mod:`.status_changes`, :mod:`.tables`,
:mod:`.discovery`) shares one :class:`Holdings`: the record publishes it, status changes add to it
and drop from it, the tables move it forward and discovery fills it.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, deque
from datetime import datetime

import attrs

from fdcore.abc import AgentLoad, HeldLease, TableLeases, TableResult, TableRun
from fdcore.clock import Clock
from fdcore.contract.models import LastJob, Request, State, Status
from fdcore.errors import StorageUnavailable
from fdcore.settings.agent_toml import AgentConfig

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
    table_ended: datetime | None = None  # when the agent saw the table's run end
    result: TableResult | None = None  # a finished table's result until it is recorded
    # An operator's cancel this agent saw and began to honour: no table of the request starts
    # again, though the status write that ends it failed (it is tried again at the next poll)
    cancelled: bool = False
    # The store operations made for its current table so far, by kind: its run record's cost
    operations: Counter[str] = attrs.field(factory=Counter)
    # When this agent last saw the status its own on the store (a write of it that landed):
    # the time of the agent record that stood then, in the store's time. None after a status
    # write whose outcome is unknown. See Tables._surely_ours.
    seen_ours_under: datetime | None = None

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def running(self) -> bool:
        return self.status.state is State.RUNNING

    def cancel_run(self) -> None:
        """Stop the table running for this request, if any (its result is never recorded)."""
        if self.run is not None:
            self.run.cancel()
            self.run = None


def is_attempt_of(status: Status, agent: str, attempt: int) -> bool:
    """The status names this agent and this attempt, finished or not.

    Only that agent writes such a status: one found after a failed If-Match is its own write
    whose answer was lost.
    """
    return status.agent == agent and status.attempt == attempt


def is_held_by(status: Status, agent: str, attempt: int) -> bool:
    """The agent still holds the request in this attempt: the status names both, not final."""
    return is_attempt_of(status, agent, attempt) and not status.state.final


#: How many of its last table runs an agent's status record shows.
LAST_JOBS = 5


class Holdings:
    """The requests this agent holds, by id, and those it knows are final."""

    def __init__(self, config: AgentConfig, leases: TableLeases, clock: Clock) -> None:
        self.agent = config.name
        self.concurrency = config.concurrency
        self.leases = leases
        self.clock = clock
        self.work: dict[str, Work] = {}
        self.final: set[str] = set()  # requests whose status is final: never looked at again
        # its last table runs, newest last: its status record shows them (the agents page)
        self.last_jobs: deque[LastJob] = deque(maxlen=LAST_JOBS)

    def add(self, work: Work) -> None:
        self.work[work.id] = work

    def holds(self, work: Work) -> bool:
        return work.id in self.work

    def forget(self, work: Work) -> None:
        """Done with the request (its status is final, or it was handed back): stop holding it.

        Nothing else happens: its lease, if still held, is its table's business.
        """
        self.work.pop(work.id, None)

    def drop(self, work: Work, why: str) -> None:
        """The request is no longer ours: stop its table, let its lease go, write nothing more."""
        log.warning("%s: request %s is no longer mine (%s); stopping it", self.agent, work.id, why)
        work.cancel_run()
        if work.lease is not None:
            with contextlib.suppress(StorageUnavailable):  # unreleased, it simply runs out
                self.leases.release(work.lease, self.clock.now())
            work.lease = None
        self.forget(work)

    @property
    def running(self) -> int:
        return sum(1 for work in self.work.values() if work.running)

    def load(self) -> AgentLoad:
        """What the claim policy sees: workers, running and waiting requests."""
        running = self.running
        return AgentLoad(self.concurrency, running, len(self.work) - running)
