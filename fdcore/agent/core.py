"""The agent: one deterministic step (:meth:`Agent.poll`) at a time, composed of four parts.

- :mod:`.presence`: its own status record, rewritten every poll; the duplicate-name guard.
- :mod:`.tables`: each held request's tables, one at a time, under the table's lease.
- :mod:`.status_changes`: every write to a request's status (claim, start, finish, hand back,
  expire, take over), each an ``If-Match`` write but the creates.
- :mod:`.discovery`: the requests it could hold: its own left by an earlier process, handed back
  ones, lost agents' ones (with ``take_over``), unclaimed ones, and those to expire.

They share :class:`~fdcore.agent.work.Holdings`, the requests this agent holds.

Nothing here sleeps, starts threads or reads the wall clock: time comes from the injected clock and
table runs are polled, never waited on. The runtime shell (:mod:`fdcore.cli.runtime`) calls
:meth:`Agent.poll` every ``poll_seconds`` and :meth:`Agent.react` whenever a table run ends, a
slot of its schedules falls due (:meth:`Agent.next_due`) or the store reports a submission; the
simulator calls the same code under virtual time.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from fdcore.abc import AgentLoad
from fdcore.agent.components import Components
from fdcore.agent.discovery import Discovery
from fdcore.agent.presence import Presence, ProcessGone
from fdcore.agent.retention import Retention
from fdcore.agent.schedules import Schedule, create_due_requests
from fdcore.agent.settings import AgentConfig
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.tables import Tables
from fdcore.agent.work import Holdings, Work
from fdcore.clock import Clock
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.access import Mailbox, ProblemLog

log = logging.getLogger("fdcore.agent")

__all__ = ["Agent", "Work"]


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
        previous_process_gone: ProcessGone = lambda record: False,
        schedules: list[Schedule] | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.mailbox = mailbox
        self.parts = components
        self.clock = clock
        self.instance = instance or uuid.uuid4().hex
        self.schedules = schedules or []
        self.stopping = False
        self.problems: ProblemLog = mailbox.problems
        self.holdings = Holdings(config, components.leases, clock)
        self.skew = ClockSkew(config.name, config.grace_seconds, clock, mailbox.storage)
        self.presence = Presence(
            config, mailbox, self.instance, self.holdings, self.schedules, previous_process_gone
        )
        self.presence.skew = self.skew
        self.status_changes = StatusChanges(config, mailbox, self.instance, self.holdings)
        self.tables = Tables(config, mailbox, components, clock, self.status_changes, self.holdings)
        self.discovery = Discovery(
            config, mailbox, components, self.instance, self.status_changes, self.holdings
        )
        self.discovery.skew = self.skew
        self.retention = Retention(
            config.retention,
            config.name,
            mailbox,
            components.leases,
            config.grace_seconds,
            clock,
            warm_up=config.stale_after,
            budget=config.poll_seconds,
        )
        self.retention.skew = self.skew
        self._outage: str | None = None
        self._looks_at_last_poll = 0  # discovery's looks counted at the end of the last poll

    @property
    def held(self) -> dict[str, Work]:
        """The requests this agent holds, by id."""
        return self.holdings.work

    @property
    def idle(self) -> bool:
        return not self.held

    def load(self) -> AgentLoad:
        """What the claim policy sees of this agent: workers, running and waiting requests."""
        return self.holdings.load()

    # -- the step --------------------------------------------------------------------------------

    def poll(self) -> None:
        """One step, as docs/agents.md tells it: record, held work, schedules, new work."""
        now = self.clock.now()
        self._guarded(lambda: self._poll(now))

    def _poll(self, now: datetime) -> None:
        self.presence.write(now, self.stopping)
        self._move_held_work(now)
        if self.stopping:
            return
        create_due_requests(self.schedules, self.mailbox, self.name, now)
        # A look made between polls (react) since the last poll did what this one would, less
        # than a poll ago: skipping it keeps the store traffic of a busy agent where it was.
        # Not with take_over: each poll's sweep is what bounds the time to take over.
        if self.config.take_over or self.discovery.looks == self._looks_at_last_poll:
            self.discovery.look_for_work(now)
            self._move_held_work(now)  # start what was just found, not a poll later
        self._looks_at_last_poll = self.discovery.looks
        self.retention.step(now)  # once per interval across agents, a bounded batch a poll

    def react(self, new_work: bool = False) -> None:
        """Between polls: do at once what a table's end, a due slot or new work calls for.

        Records ended tables and starts each request's next one; creates the requests of due
        slots; and when a worker is free and there is work to take (requests left unclaimed by
        the last look, a request just created, or ``new_work``: the store said something was
        submitted), looks for work once. Without any of these it touches no file, so the
        runtime may call it as often as something happens. The poll stays the heartbeat, the
        sweep and the discovery of work nobody announced.
        """
        self._guarded(lambda: self._react(self.clock.now(), new_work))

    def _react(self, now: datetime, new_work: bool) -> None:
        ended = self._move_held_work(now)
        if self.stopping:
            return
        created = create_due_requests(self.schedules, self.mailbox, self.name, now)
        hint = new_work or bool(created) or (ended and self.discovery.backlog > 0)
        if hint and self.parts.claim.may_claim(self.load()):
            self.discovery.look_for_work(now)
            self._move_held_work(now)

    def next_due(self, now: datetime) -> datetime | None:
        """When the next slot of this agent's schedules is due (None without schedules)."""
        if self.stopping or not self.schedules:
            return None
        return min(schedule.timetable.next_due(now).due_at for schedule in self.schedules)

    def _guarded(self, step: Callable[[], None]) -> None:
        """Run a step; a mailbox that cannot be reached is reported once and retried later."""
        try:
            step()
        except StorageUnavailable as exc:
            # Keep what we hold, report once, retry at the next step.
            if self._outage is None:
                log.warning("%s: mailbox unavailable, will retry: %s", self.name, exc)
            self._outage = str(exc)
            return
        if self._outage is not None:
            log.info("%s: mailbox reachable again", self.name)
            self._outage = None

    def _move_held_work(self, now: datetime) -> bool:
        """Record finished tables, then start next ones (or hand requests back when stopping).

        True if a request left this agent (finished, failed or handed back): a worker freed.
        """
        before = len(self.held)
        # Running requests first, then waiting ones by age: a free worker goes to the oldest.
        for work in sorted(self.held.values(), key=lambda w: (not w.running, w.status.updated_at)):
            if not self.holdings.holds(work):
                continue  # dropped while an earlier one moved
            if not self.tables.poll_run(work, now):
                continue  # its table still runs (stopping lets it finish), or it is not ours
            if self.stopping:
                self._hand_back(work, now)
            elif work.running or self.load().running < self.config.concurrency:
                self.tables.next_table(work, now)
        return len(self.held) < before

    def _hand_back(self, work: Work, now: datetime) -> None:
        """Give a request whose table ended (or was cancelled) back: its lease, then its status."""
        self.tables.release_lease(work, now)
        self.status_changes.hand_back(work, now)

    # -- stopping --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; hand back waiting requests; let running tables finish."""
        self.stopping = True

    def abandon(self) -> None:
        """Give up what is held now (the shutdown grace ran out): hand each request back."""
        now = self.clock.now()
        for work in list(self.held.values()):
            work.cancel_run()
            self._hand_back(work, now)

    def close(self) -> None:
        """Write the final status record after a clean stop (if the mailbox can be reached)."""
        self.presence.write_final(self.clock.now(), self.stopping)
