"""The agent: one deterministic step (:meth:`Agent.poll`) at a time, composed of six parts.

- :mod:`.presence`: its own status record, rewritten every ``stale_after / 4``; the
  duplicate-name guard.
- :mod:`.tables`: each held request's tables, one at a time, under the table's lease.
- :mod:`.status_changes`: every write to a request's status (claim, start, finish, hand back,
  expire, take over), each an ``If-Match`` write but the creates.
- :mod:`.discovery`: the requests it could hold: its own left by an earlier process, handed back
  ones, lost agents' ones (with ``take_over``), unclaimed ones, and those to expire.
- :mod:`.cancels`: operators' cancels: a held request cancelled stops at the poll's start.
- :mod:`.retention`: once per interval across the fleet, finished requests move to the archive.

They share :class:`~fdcore.agent.work.Holdings`, the requests this agent holds. Each runs on
its own guard (:meth:`Agent._guarded`): nothing but a duplicate name ends the agent.

Nothing here sleeps, starts threads or reads the wall clock: time comes from the injected clock and
table runs are polled, never waited on. The runtime shell (:mod:`fdcore.cli.runtime`) calls
:meth:`Agent.poll` every ``poll_seconds`` and :meth:`Agent.react` whenever a table run ends, a
slot of its schedules falls due or a lease a request waits for runs out (:meth:`Agent.next_wake`),
or the store reports a submission, a lease written or a status changed; the simulator calls the
same code under virtual time.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from fdcore.abc import AgentLoad
from fdcore.agent.cancels import Cancels
from fdcore.agent.components import Components
from fdcore.agent.discovery import Discovery
from fdcore.agent.presence import Presence, ProcessGone
from fdcore.agent.retention import Retention
from fdcore.agent.schedules import Schedule, create_due_requests
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.tables import Tables
from fdcore.agent.work import Holdings, Work
from fdcore.clock import Clock
from fdcore.errors import DuplicateAgent, MailboxFileError, StorageUnavailable
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.mailbox.counting import charged_to
from fdcore.mailbox.index import MailboxIndex
from fdcore.settings.agent_toml import AgentConfig

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
        contain_errors: bool = True,
    ) -> None:
        self.config = config
        self.name = config.name
        self.mailbox = mailbox
        self.components = components
        self.clock = clock
        self.instance = instance or uuid.uuid4().hex
        self.schedules = schedules or []
        self.stopping = False
        self.problems: ProblemLog = mailbox.problems
        self.holdings = Holdings(config, components.leases, clock)
        self.skew = ClockSkew(config.name, config.grace_seconds, clock, mailbox.storage)
        self.presence = Presence(
            config,
            mailbox,
            self.instance,
            self.holdings,
            self.schedules,
            previous_process_gone,
            skew=self.skew,
        )
        self.status_changes = StatusChanges(
            config, mailbox, self.instance, self.holdings, self._record_time
        )
        self.tables = Tables(
            config,
            mailbox,
            components,
            clock,
            self.status_changes,
            self.holdings,
            skew=self.skew,
            ready=self.keep_alive,
        )
        self.cancels = Cancels(mailbox, self.holdings, self.status_changes, self.tables)
        # What this agent knows of the mailbox, read again only where it changed: one index
        # for every part that looks at the folders.
        self.index = MailboxIndex(mailbox)
        self.discovery = Discovery(
            config,
            mailbox,
            components,
            self.instance,
            self.status_changes,
            self.holdings,
            skew=self.skew,
            cancels=self.cancels,
            index=self.index,
            ready=self.keep_alive,
        )
        self.retention = Retention(
            config.retention,
            config.name,
            mailbox,
            components.leases,
            config.grace_seconds,
            clock,
            warm_up=config.stale_after,
            budget=config.poll_seconds,
            skew=self.skew,
            index=self.index,
        )
        # In a spell of store errors, and the last record write that had landed when it began;
        # store errors met so far (a poll that meets none may end the spell).
        self._outage = False
        self._written_before_outage: tuple[datetime, bool] | None = None
        self._store_errors = 0
        self.contain_errors = contain_errors
        self.step_errors = 0  # steps cut short by an error other than the store's
        self._errors_seen: set[str] = set()
        # The last poll's record write landed (or was not due): the agent may take work. Until
        # a poll says so, reactions take nothing either (_react).
        self._recorded = False
        # A request ended as the last poll started what its look found: a worker freed after
        # that look, and the poll took the end's wake-up. The next reaction looks for it (_react).
        self._freed_by_poll = False

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
        errors = self._store_errors
        # Each part on its own guard: a record that cannot be written must not keep running
        # tables from being followed (leases renewed, or runs stopped before a lease runs out).
        recorded = self._recorded = self._guarded(
            lambda: self.presence.heartbeat(now, self.stopping, idle=self.idle)
        )
        self._guarded(lambda: self._follow_held_work(now))
        if not self.stopping and recorded:  # an agent that cannot say it is alive takes nothing
            self._guarded(lambda: self._look(now))
            # Once per interval across agents, a bounded batch a poll (docs/retention.md).
            self._guarded(lambda: self.retention.step(now))
        if self._store_errors == errors:
            self._reachable()

    def _record_time(self) -> datetime | None:
        """The time (the store's) of this agent's record that landed last; None before one."""
        written = self.presence.written
        return written[0] if written is not None else None

    def keep_alive(self) -> bool:
        """Write this agent's record if it is due by the clock now; True while it may take work.

        Called before each claim, takeover and table start, and as a sweep reads statuses: a
        poll's heartbeat is written at its start, and a poll or reaction whose work takes
        long (a host starved of CPU, a slow store) must not claim or start a table on a record
        the others could judge lost before its next one. So whatever is taken is taken with a
        record at most ``stale_after / 4`` old, and the others judge the agent lost no sooner
        than ``3/4 x stale_after + grace_seconds`` later. A heartbeat needs the agent's own
        steps: an agent whose loop hangs writes none, and is judged lost as before.
        """
        with charged_to(self.mailbox.storage, None):  # the agent's, not the table's
            self.presence.heartbeat(self.clock.now(), self.stopping)
        return not self.stopping

    def _reachable(self) -> None:
        """A poll met no store error: an outage is over if a write landed too since it began.

        A step that happened to write nothing (a read-only or full disk still serves reads)
        proves nothing: the agent's own record, rewritten every ``stale_after / 4`` and at
        every poll while it cannot be, is the write that says so. A spell of failing writes
        is then one spell: reported once as it begins and once as it ends.
        """
        if self._outage and self.presence.written != self._written_before_outage:
            log.info("%s: mailbox reachable again", self.name)
            self._outage = False

    def _follow_held_work(self, now: datetime) -> None:
        self.cancels.new_poll()
        self.cancels.stop_held(now)
        self._move_held_work(now)
        self.tables.settle_owed(now)  # runs of requests dropped in an outage, once it is over
        self.tables.write_unwritten()  # run records an outage kept back, once it is over

    def _look(self, now: datetime) -> None:
        created = create_due_requests(self.schedules, self.mailbox, self.name, now)
        # Whatever a reaction looked at since the last poll: the poll is the discovery of work
        # nobody announced (submitted from another machine to a watched network folder, or to
        # a store without a watch), found at the next poll. Skipping this look after a
        # reaction's left what came after that look to the poll after.
        self.discovery.look_for_work(now, may_skip=not created)
        self.cancels.stop_held(now)  # one taken over or claimed may be cancelled
        # Start what was just found, not a poll later; a request that ended meanwhile is the
        # next reaction's to look for (the runtime reacts at once: the run's end woke it).
        self._freed_by_poll = self._move_held_work(now)

    def react(self, new_work: bool = False) -> None:
        """Between polls: do at once what a table's end, a due slot or new work calls for.

        Records ended tables and starts each request's next one; creates the requests of due
        slots; and when a worker is free and there is work to take (requests left unclaimed by
        the last look, a request just created, or ``new_work``: the store said something was
        submitted), looks for work once. Without any of these it touches no file, so the
        runtime may call it as often as something happens. The poll stays the heartbeat, the
        sweep and the discovery of work nobody announced: an agent whose last poll could not
        write its record, or whose record went stale, takes nothing between polls either.
        """
        self._guarded(lambda: self._react(self.clock.now(), new_work))

    def _react(self, now: datetime, new_work: bool) -> None:
        ended = self._move_held_work(now) or self._freed_by_poll
        self._freed_by_poll = False
        if self.stopping or not self._recorded or self.presence.silent(now):
            # As in the poll, an agent that cannot say it is alive takes nothing: not after a
            # poll whose record write failed (what it took would wait unseen: no table lease
            # before a record write measured its clock, and an agent without a readable record
            # is never judged lost), nor once its record went stale (writes refused for a
            # while: the others may judge it lost and take back what it took) until a poll
            # has written it again.
            return
        created = create_due_requests(self.schedules, self.mailbox, self.name, now)
        hint = new_work or bool(created) or (ended and self.discovery.backlog > 0)
        if not hint:
            return  # nothing to look for: the policy (a host gate reads files) is not asked
        if not self.components.claim.may_claim(self.load()):
            if new_work or created:
                # Work reported while every worker is busy: the first to free looks at once
                # (a full agent's poll does not list the requests to learn it; Discovery).
                self.discovery.backlog = max(self.discovery.backlog, 1)
            return
        self.discovery.look_for_work(now)
        self.cancels.stop_held(now)  # what the look took on may be cancelled: not started
        # A request that ended during the look freed a worker the look did not see: its end
        # was this reaction's to handle, and no other will come for it, so look again.
        while self._move_held_work(now) and self.discovery.backlog > 0:
            if not self.components.claim.may_claim(self.load()):
                break
            self.discovery.look_for_work(now)
            self.cancels.stop_held(now)

    def next_due(self, now: datetime) -> datetime | None:
        """When the next slot of this agent's schedules is due (None without schedules)."""
        if self.stopping or not self.schedules:
            return None
        due: list[datetime] = []
        for schedule in self.schedules:
            # A slot function's exception must not leave the runtime's loop: that schedule
            # wakes nobody (its polls still try it, under the poll's guard).
            try:
                due.append(schedule.timetable.next_due(now).due_at)
            except Exception as exc:
                self._failed(exc)
        return min(due, default=None)

    def next_wake(self, now: datetime) -> datetime | None:
        """When the agent should react though nothing is reported: its next due slot, or when
        a table lease one of its requests waits for runs out (at once if this agent freed it
        itself after the request was refused it). Releases by others and their finishes are
        reported by the store's watch where it has one, else seen at the next poll."""
        wakes = [self.next_due(now)]
        if not self.stopping:
            wakes.append(self.tables.next_free(now))
        return min((at for at in wakes if at is not None), default=None)

    def _guarded(self, step: Callable[[], object]) -> bool:
        """Run a step; True if it completed. Nothing it raises ends the agent but a duplicate.

        A mailbox that cannot be reached is reported once and retried at the next step (until
        a poll finds it reachable again, :meth:`_reachable`). Any
        other error (a plugin's, a bug) is logged with its traceback once, and the step is
        tried again next time: one bad file, value or plugin call must not stop the agent, and
        the parts write in an order that a step cut short anywhere leaves safe (the same order
        that makes a store error anywhere safe). ``contain_errors=False`` (the simulator) raises
        them instead, so a bug fails the run that found it.
        """
        try:
            step()
        except StorageUnavailable as exc:
            # Keep what we hold, report once, retry at the next step; a poll says when it is over.
            self._store_errors += 1
            if not self._outage:
                log.warning("%s: mailbox unavailable, will retry: %s", self.name, exc)
                self._outage, self._written_before_outage = True, self.presence.written
            return False
        except DuplicateAgent:
            raise  # another process runs under this name: this one must stop
        except Exception as exc:
            self._failed(exc)
            return False
        return True

    def _failed(self, exc: Exception) -> None:
        """Log a failed step: with its traceback the first time, a line after that (or raise
        it again, with ``contain_errors=False``)."""
        if not self.contain_errors:
            raise exc
        self.step_errors += 1
        what = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, MailboxFileError):
            self.problems.report(str(exc.path), str(exc))
        elif what not in self._errors_seen:
            self._errors_seen.add(what)
            log.error("%s: a step failed and will be retried: %s", self.name, what, exc_info=exc)
        else:
            log.debug("%s: the step failed again: %s", self.name, what)

    def _move_held_work(self, now: datetime) -> bool:
        """Record finished tables, then start next ones (or hand requests back when stopping).

        True if a request left this agent (finished, failed or handed back): a worker freed.
        """
        before = len(self.held)
        self.tables.new_step()
        # The requests running, counted again only once one may have moved: an agent holding
        # many waiting requests would otherwise count them all for each one of them.
        running: int | None = None
        # Running requests first, then waiting ones by age: a free worker goes to the oldest.
        for work in sorted(self.held.values(), key=lambda w: (not w.running, w.status.updated_at)):
            if not self.holdings.holds(work):
                continue  # dropped while an earlier one moved
            if work.cancelled:
                continue  # its stop is under way (Cancels): retried by the next poll, not run
            if work.run is not None or work.result is not None:
                running = None  # its table ends or is recorded: it may stop running
            # What the request's table costs in store operations: charged to its run record
            with charged_to(self.mailbox.storage, work.operations):
                movable = self.tables.poll_run(work, now)
            if not movable:
                continue  # its table still runs (stopping lets it finish), or it is not ours
            if not (self.stopping or work.running):
                running = self.holdings.running if running is None else running
                if running >= self.config.concurrency:
                    continue  # no worker free: it waits
            running = None
            with charged_to(self.mailbox.storage, work.operations):
                if self.stopping:
                    self._hand_back(work, now)
                else:
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
        """Write what is owed after a clean stop (if the mailbox can be reached): the run records
        an outage kept back, then the final status record."""
        self.tables.settle_owed(self.clock.now())
        self.tables.write_unwritten()
        for key in self.tables.unwritten:
            log.warning("%s: could not write run record %s before stopping", self.name, key)
        for request in self.tables.owed:
            log.warning("%s: could not record the run of %s before stopping", self.name, request)
        self.presence.write_final(self.clock.now(), self.stopping)
