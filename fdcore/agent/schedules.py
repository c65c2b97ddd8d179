"""Schedules: turning due slots into requests.

A schedule with ``shared = true`` may be given to several agents (same id, entities and timing).
When a slot is due each of them creates ``requests/sched-<id>-<slot>.json`` with create-if-absent;
only the first lands, so each due time makes exactly one request, whoever writes first. An
unshared schedule makes ``sched-<id>-<slot>-<agent>``, which only its own agent claims.

The slot comes from the due time (see :class:`fdcore.abc.SlotFunction`), never from when an
agent noticed it. An agent creates only the **latest** due slot, and only before its deadline: a
run that is over never comes back. It remembers the last slot it wrote or saw, so it makes at
most one conditional write per due slot.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime

import attrs

from fdcore.abc import Slot, Timetable
from fdcore.contract.ids import is_valid_id
from fdcore.contract.layout import request_key
from fdcore.contract.models import Request, ScheduleInfo, ScheduleRef
from fdcore.contract.schedules import ALL_TABLES
from fdcore.errors import AlreadyExists, ConfigError, FileTooLarge, MailboxFileError
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.signal import announce
from fdcore.plugins.manager import SLOT, Plugins
from fdcore.settings.agent_toml import AgentConfig, ScheduleConfig

log = logging.getLogger("fdcore.schedules")


@attrs.define
class Schedule:
    """One of this agent's schedules, parsed."""

    config: ScheduleConfig
    timetable: Timetable
    info: ScheduleInfo
    last_slot: str | None = None  # the latest slot written or seen: never written twice

    def published(self, now: datetime) -> ScheduleInfo:
        """The schedule as the agent's status record shows it, with its next due time (None if
        the slot function fails: the record must still be written; the look reports the error)."""
        try:
            due: datetime | None = self.timetable.next_due(now).due_at
        except Exception:
            due = None
        return attrs.evolve(self.info, next_due=due)

    def request_id(self, slot: Slot, agent: str) -> str:
        base = f"sched-{self.config.id}-{slot.id}"
        return base if self.config.shared else f"{base}-{agent}"


def fingerprint(config: ScheduleConfig, when: str) -> str:
    """A short hash of what must match between agents' copies of a shared schedule."""
    content = {"entities": list(config.entities), "when": when, "shared": config.shared}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]


def build_schedules(config: AgentConfig, plugins: Plugins) -> list[Schedule]:
    """Parse every ``[[schedules]]`` entry with its slot function; errors name file and key."""
    schedules = []
    for index, entry in enumerate(config.schedules):
        where = f"[[schedules]] #{index + 1} {entry.timing}"
        function = plugins.get(SLOT, entry.timing)
        try:
            timetable = function.parse(entry.spec, dict(entry.options))
        except ValueError as exc:
            raise ConfigError(config.source, where, str(exc)) from None
        longest = f"sched-{entry.id}-{'9' * 15}-{config.name}"
        if not is_valid_id(longest):
            raise ConfigError(
                config.source,
                f"[[schedules]] #{index + 1} id",
                f"{entry.id!r} is too long to name its requests (keep ids under 64 characters)",
            )
        when = timetable.describe()
        info = ScheduleInfo(
            id=entry.id,
            shared=entry.shared,
            when=when,
            entities=list(entry.entities),
            fingerprint=fingerprint(entry, when),
            owner=entry.owner or config.owner,
        )
        schedules.append(Schedule(entry, timetable, info))
    return schedules


def create_due_requests(
    schedules: list[Schedule], mailbox: Mailbox, agent: str, now: datetime
) -> list[str]:
    """Create the latest due slot's request of each schedule, if still before its deadline.

    Returns the ids of the requests this call created (not those another agent created first).
    """
    created = []
    for schedule in schedules:
        slot = schedule.timetable.latest_due(now)
        if slot is None or slot.id == schedule.last_slot:
            continue
        if now > slot.deadline:
            schedule.last_slot = slot.id
            continue  # its run is over: an agent coming up late does not bring it back
        request = Request(
            id=schedule.request_id(slot, agent),
            entities=list(schedule.config.entities) or [ALL_TABLES],
            created_at=slot.due_at,
            created_by=agent,
            deadline=slot.deadline,
            schedule=ScheduleRef(id=schedule.config.id, slot=slot.id),
            affinity=None if schedule.config.shared else agent,
        )
        if schedule.last_slot is None and _exists(mailbox, request_key(request.id)):
            # First look since this process started: an earlier process of this agent, or
            # another agent, made it already. A read, so a restart adds no write for the slot.
            schedule.last_slot = slot.id
            continue
        try:
            mailbox.create(request_key(request.id), request)
            created.append(request.id)
            log.info("%s: schedule %s is due: created %s", agent, schedule.config.id, request.id)
        except AlreadyExists:
            pass  # another agent made this slot's request
        except FileTooLarge as exc:  # its tables do not fit the bound: no request, reported
            mailbox.problems.report(exc.path, f"schedule {schedule.config.id}: {exc}")
        # Remembered once the create landed or found the request there: a store error leaves
        # the slot to be tried again at the next poll, within its window.
        schedule.last_slot = slot.id
    if created:
        announce(mailbox)  # the other agents look at once, not at their next full listing
    return created


def _exists(mailbox: Mailbox, key: str) -> bool:
    """Whether ``key`` holds something: a file that is no mailbox file (a FIFO) counts."""
    try:
        return mailbox.read_file(key) is not None  # within the operator's bound
    except MailboxFileError:
        return True
