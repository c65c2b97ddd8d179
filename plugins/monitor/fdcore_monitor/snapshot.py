"""What the monitor reads from the mailbox: the rows of the ``fdcore`` commands, at one moment.

One :class:`Source` per ``fdcore monitor``; each page, fragment, JSON answer and scrape reads a
fresh :class:`Fleet` through it. The rows are those of ``fdcore agents``, ``fdcore queue`` and
``fdcore schedules`` (:mod:`fdcore.environment`), never a second reading of the files, and the
queue is read through one :class:`~fdcore.environment.QueueReader` kept for the monitor's life:
a look costs the listings and the files that changed since the last one.
"""

from __future__ import annotations

from datetime import datetime, timezone

import attrs

from fdcore.abc import TakeoverPolicy
from fdcore.contract.models import Incident
from fdcore.durations import GRACE
from fdcore.environment import (
    AgentRow,
    Mailbox,
    QueueReader,
    QueueRow,
    ScheduleRow,
    agent_rows,
    incidents,
    lost_agent_policy,
    open_mailbox,
    schedule_rows,
    schedule_warnings,
    with_host_folder,
)


@attrs.frozen
class Fleet:
    """An environment's agents, requests and schedules as read at ``now``."""

    now: datetime
    agents: list[AgentRow]
    requests: list[QueueRow]
    schedules: list[ScheduleRow]
    warnings: list[str]

    def agent_states(self) -> dict[str, str]:
        return {row.name: row.state for row in self.agents}


@attrs.define
class Source:
    """One environment as the monitor reads it: the takeover policy's idea of "lost" (with
    ``grace``, as ``fdcore agents --grace``) and, with ``host``, that host folder's slots."""

    mailbox: Mailbox
    grace: float = GRACE.default
    host: str | None = None
    host_admission: str = "slots"
    # The policy, or None and why (without fdcore-takeover no agent is shown lost).
    lost: tuple[TakeoverPolicy | None, str | None] = attrs.field(factory=lost_agent_policy)
    queue: QueueReader = attrs.field(
        default=attrs.Factory(lambda self: QueueReader(self.mailbox), takes_self=True)
    )

    @classmethod
    def open(
        cls,
        url: str,
        grace: float = GRACE.default,
        host: str | None = None,
        host_admission: str = "slots",
    ) -> Source:
        # create=False: a mistyped URL is "environment not found", never a new empty mailbox
        return cls(open_mailbox(url, create=False), grace, host, host_admission)

    def agents(self, now: datetime) -> list[AgentRow]:
        rows = agent_rows(self.mailbox, now, self.lost[0], self.grace)
        return with_host_folder(rows, self.host, self.host_admission) if self.host else rows

    def fleet(self, now: datetime | None = None) -> Fleet:
        now = now or datetime.now(timezone.utc)
        agents = self.agents(now)
        return Fleet(
            now=now,
            agents=agents,
            requests=self.queue.rows(),
            schedules=schedule_rows(agents),
            warnings=schedule_warnings(agents) + [why for why in self.lost[1:] if why],
        )

    def incidents(self) -> list[Incident]:
        """Open incidents first, then the resolved ones, newest first (``incidents list --all``)."""
        return incidents(self.mailbox)
