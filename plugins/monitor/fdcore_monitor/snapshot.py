"""What the monitor reads from the mailbox: the rows of the ``fdcore`` commands, at one moment.

One :class:`Source` per ``fdcore monitor``, around ONE :class:`fdcore.Environment` kept for the
process: each page, fragment, JSON answer and scrape reads a fresh :class:`Fleet` through it.
The rows are those of ``fdcore agents``, ``fdcore queue`` and ``fdcore schedules`` (the
environment's :meth:`~fdcore.Environment.agents` and :meth:`~fdcore.Environment.queue`), never a
second reading of the files: the environment keeps one look at the queue for the monitor's life,
so a look costs the listings and the files that changed since the last one.
"""

from __future__ import annotations

from datetime import datetime, timezone

import attrs

from fdcore.contract.models import Incident
from fdcore.environment import (
    AgentRow,
    Environment,
    QueueFilter,
    QueuePage,
    QueueRow,
    ScheduleRow,
    queue_page,
    schedule_rows,
    schedule_warnings,
    with_host_folder,
)
from fdcore.settings.checks import GRACE


@attrs.frozen
class Fleet:
    """An environment's agents, requests and schedules as read at ``now``; ``queue`` is the page
    of the queue the look asked for (every request, unless filtered or paged)."""

    now: datetime
    agents: list[AgentRow]
    queue: QueuePage
    schedules: list[ScheduleRow]
    warnings: list[str]

    @property
    def requests(self) -> list[QueueRow]:
        """The queue's rows oldest first (as ``fdcore queue`` prints them)."""
        return self.queue.rows[::-1]

    def agent_states(self) -> dict[str, str]:
        return {row.name: row.state for row in self.agents}


@attrs.define
class Source:
    """One environment as the monitor reads it: ``grace`` is the takeover policy's idea of
    "lost" (as ``fdcore agents --grace``) and, with ``host``, that host folder's slots."""

    environment: Environment
    grace: float = GRACE.default
    host: str | None = None
    host_admission: str = "slots"

    @classmethod
    def open(
        cls,
        url: str,
        grace: float = GRACE.default,
        host: str | None = None,
        host_admission: str = "slots",
    ) -> Source:
        # not created: a mistyped URL is "environment not found", never a new empty mailbox
        return cls(Environment.open(url, via="monitor"), grace, host, host_admission)

    def agents(self, queue: list[QueueRow] | None = None) -> list[AgentRow]:
        """The agents' rows; what each holds counted from ``queue`` (a look's every row)."""
        rows = self.environment.agents(grace=self.grace, queue=queue)
        return with_host_folder(rows, self.host, self.host_admission) if self.host else rows

    def fleet(
        self, where: QueueFilter | None = None, offset: int = 0, limit: int | None = None
    ) -> Fleet:
        """The agents, schedules and the page of the queue ``where``, ``offset`` and ``limit``
        select (:meth:`fdcore.Environment.queue`), read now."""
        now = datetime.now(timezone.utc)
        every = self.environment.queue().rows  # one look for the page and the agents' work
        agents = self.agents(every)
        why_no_lost = self.environment.lost_agents_unknown
        oldest_first = every[::-1]
        page = queue_page(oldest_first, where or QueueFilter(), offset, limit or max(len(every), 1))
        return Fleet(
            now=now,
            agents=agents,
            queue=page,
            schedules=schedule_rows(agents),
            warnings=schedule_warnings(agents) + ([why_no_lost] if why_no_lost else []),
        )

    def incidents(self) -> list[Incident]:
        """Open incidents first, then the resolved ones, newest first (``incidents list --all``)."""
        return self.environment.incidents()
