"""Evaluation: what is wrong in an environment now, and the incident document brought in line.

Each kind is judged from the files it needs, and resolution is scoped by what was read: a kind
whose listing failed resolves nothing, and a subject whose file could not be read keeps its
incident open (an unreadable agent record never resolves ``agent_offline``).

- ``agent_offline``: an agent its fleet's takeover policy judges lost (``stale_record``: its
  record past ``updated_at + stale_after + grace``) that did not stop cleanly (no
  ``stopped_at``): the verdict ``fdcore agents`` and the monitor show
  (:mod:`fdcore.mailbox.verdict`).
- ``request_failed``: a status ``failed`` (after ``max_attempts``, or by a failed table), with its
  message.
- ``slot_missed``: a shared schedule's request that ended ``expired`` with no attempt run.
- ``objective``: see :mod:`.objectives`.
- ``schedule_conflict``: the two warnings of ``fdcore schedules`` (an unshared schedule held by
  several agents; copies of a shared one that differ), from the agents that have not stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import attrs

from fdcore.contract.models import (
    AGENT_OFFLINE,
    INCIDENT_KINDS,
    REQUEST_FAILED,
    SCHEDULE_CONFLICT,
    SLOT_MISSED,
    Incident,
    IncidentDocument,
    ScheduleInfo,
    State,
    Status,
)
from fdcore.contract.schedules import schedule_conflicts
from fdcore.errors import StorageUnavailable
from fdcore.incidents.book import Finding, IncidentBook, report, resolve_cleared
from fdcore.incidents.objectives import look_at_objectives
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.index import Folder, MailboxIndex
from fdcore.mailbox.verdict import AgentVerdicts
from fdcore.settings.agent_toml import Objective

T = TypeVar("T")

KINDS = INCIDENT_KINDS


@attrs.define
class Evaluation:
    """What one evaluation saw: findings, the kinds it read completely enough to resolve, the
    keys it could not judge (unreadable files), and the problems met on the way."""

    findings: list[Finding] = attrs.field(factory=list)
    kinds: set[str] = attrs.field(factory=set)
    judged: set[str] = attrs.field(factory=set)  # keys judged one by one (objectives)
    unknown: set[str] = attrs.field(factory=set)
    problems: list[str] = attrs.field(factory=list)
    statuses: list[Status] = attrs.field(factory=list)  # every status read

    def unreadable(self, key: str, path: str, problem: object) -> None:
        """The file at ``path`` could not be read: incident ``key`` is neither opened nor
        resolved, and the problem is noted."""
        self.unknown.add(key)
        self.problems.append(f"{path}: {problem}")


@attrs.frozen
class Outcome:
    """What an evaluation changed in the document."""

    opened: list[Incident]
    bumped: list[Incident]
    resolved: list[Incident]
    problems: list[str]


def look(
    mailbox: Mailbox,
    now: datetime,
    grace_seconds: float,
    objectives: Sequence[Objective] = (),
    index: MailboxIndex | None = None,
    verdicts: AgentVerdicts | None = None,
) -> Evaluation:
    """Read the agent records and statuses and say what is wrong. Never raises for a file.

    Through ``index`` (an evaluator's own, kept from one evaluation to the next) a file is read
    again only when it changed, and a final status never again. An agent is offline when its
    fleet's takeover policy judges it lost (``verdicts``: :mod:`fdcore.mailbox.verdict`), as
    ``fdcore agents`` and the monitor show it."""
    index = index or MailboxIndex(mailbox)
    seen = Evaluation()
    _look_at_agents(index, now, grace_seconds, seen, verdicts or AgentVerdicts())
    if _look_at_requests(index, seen):
        findings, judged, problems = look_at_objectives(mailbox, seen.statuses, objectives, now)
        seen.findings.extend(findings)
        seen.judged |= judged
        seen.problems.extend(problems)
    return seen


def _entry(folder: Folder[T], id: str, seen: Evaluation, unknown: str) -> T | None:
    """``id``'s file through the index; None, with ``unknown`` not judged, if it cannot be read."""
    try:
        entry = folder.get(id)
    except StorageUnavailable as exc:
        seen.unreadable(unknown, f"{folder.prefix}{id}.json", exc)
        raise _Unread() from None
    if entry.problem is not None:
        seen.unreadable(unknown, entry.key, entry.problem)
        raise _Unread()
    return entry.value


class _Unread(Exception):
    """A file that could not be read (reported in the evaluation)."""


def _look_at_agents(
    index: MailboxIndex, now: datetime, grace: float, seen: Evaluation, verdicts: AgentVerdicts
) -> None:
    try:
        names = list(index.agents.list())
    except StorageUnavailable as exc:
        seen.problems.append(f"agents not listed, {AGENT_OFFLINE} not evaluated: {exc}")
        return
    copies: dict[str, list[tuple[str, ScheduleInfo]]] = {}
    all_read = True
    for name in names:
        try:
            record = _entry(index.agents, name, seen, f"{AGENT_OFFLINE}:{name}")
        except _Unread:
            all_read = False  # its schedules are unknown too
            continue
        if record is None:
            continue
        if record.stopped_at is None:
            for info in record.schedules:
                copies.setdefault(info.id, []).append((name, info))
        if verdicts.lost(record, now, grace):
            seen.findings.append(
                Finding(
                    AGENT_OFFLINE,
                    name,
                    f"Agent {name} is offline",
                    since=record.updated_at + timedelta(seconds=record.stale_after),
                    message=f"no status record since {record.updated_at:%Y-%m-%d %H:%M:%S} UTC "
                    f"(stale after {record.stale_after:g}s) and it did not stop cleanly"
                    + (f"; owner: {record.owner}" if record.owner else ""),
                )
            )
    seen.kinds.add(AGENT_OFFLINE)
    seen.problems.extend(verdicts.problems.values())
    for schedule_id, conflict in schedule_conflicts(copies).items():
        what = conflict.partition(":")[0]
        seen.findings.append(
            Finding(
                SCHEDULE_CONFLICT,
                schedule_id,
                f"Schedule {schedule_id}: {what.lower()}",
                conflict,
                severity="warning",
            )
        )
    if all_read:
        seen.kinds.add(SCHEDULE_CONFLICT)


def _look_at_requests(index: MailboxIndex, seen: Evaluation) -> bool:
    """Read every status; False if they could not be listed (nothing of theirs is judged)."""
    try:
        ids = list(index.statuses.list())
    except StorageUnavailable as exc:
        seen.problems.append(f"statuses not listed, {REQUEST_FAILED} not evaluated: {exc}")
        return False
    slots_read = True
    for request_id in ids:
        try:
            status = _entry(index.statuses, request_id, seen, f"{REQUEST_FAILED}:{request_id}")
        except _Unread:
            slots_read = False  # we cannot tell which slot it was for
            continue
        if status is None:
            continue
        seen.statuses.append(status)
        if status.state is State.FAILED:
            seen.findings.append(
                Finding(
                    REQUEST_FAILED,
                    request_id,
                    f"Request {request_id} failed",
                    status.message or _last_message(status),
                    since=status.updated_at,
                )
            )
        elif status.state is State.EXPIRED and not status.attempts:
            slots_read &= _look_at_slot(index, status, seen)
    seen.kinds.add(REQUEST_FAILED)
    if slots_read:
        seen.kinds.add(SLOT_MISSED)
    return True


def _look_at_slot(index: MailboxIndex, status: Status, seen: Evaluation) -> bool:
    """A request that expired unrun: a missed slot if a shared schedule made it. False if the
    request could not be read."""
    request_id = status.request
    try:
        entry = index.requests.get(request_id)
    except StorageUnavailable as exc:
        seen.problems.append(f"requests/{request_id}.json: {exc}")
        return False
    if entry.problem is not None:
        seen.problems.append(f"requests/{request_id}.json: {entry.problem}")
        return False
    request = entry.value
    if request is None or request.schedule is None or request.affinity is not None:
        return True  # not a shared schedule's (an unshared one's carry its agent's affinity)
    slot = f"{request.schedule.id}.{request.schedule.slot}"
    seen.findings.append(
        Finding(
            SLOT_MISSED,
            slot,
            f"Schedule {request.schedule.id} missed slot {request.schedule.slot}",
            f"request {request_id} expired before any agent ran it",
            since=status.updated_at,
        )
    )
    return True


def _last_message(status: Status) -> str | None:
    messages = [attempt.message for attempt in status.attempts if attempt.message]
    return messages[-1] if messages else None


#: How far back a failure or missed slot may have happened to open an incident: enabling
#: incidents on an environment with a long history must not open (and post) all of it.
LOOKBACK = 86400.0
#: The most open incidents the document holds: it must stay far below the codec's file bound.
MAX_OPEN = 500


def evaluate(
    book: IncidentBook,
    now: datetime,
    grace_seconds: float,
    by: str,
    objectives: Sequence[Objective] = (),
    lookback: float = LOOKBACK,
    index: MailboxIndex | None = None,
    verdicts: AgentVerdicts | None = None,
) -> Outcome:
    """Look at the environment and bring the incident document in line, in one If-Match write.

    ``objectives`` are this evaluator's (agent.toml): it judges, opens and resolves only those.
    A condition that began more than ``lookback`` ago opens no new incident (an open one is
    still bumped, and none is resolved for being old).
    """
    seen = look(book.mailbox, now, grace_seconds, objectives, index, verdicts)
    found_keys = {finding.key for finding in seen.findings}
    oldest = now - timedelta(seconds=lookback)

    def edit(document: IncidentDocument) -> Outcome:
        before = {incident.key for incident in document.open}
        opened: list[Incident] = []
        bumped: list[Incident] = []
        problems = list(seen.problems)
        over = 0
        for finding in seen.findings:
            if finding.key not in before:
                if finding.since is not None and finding.since < oldest:
                    continue
                if len(document.open) >= MAX_OPEN:
                    over += 1
                    continue
            incident = report(document, finding, now, by)
            if incident is not None:
                (bumped if finding.key in before else opened).append(incident)
        if over:
            problems.append(f"{over} incidents not opened: {MAX_OPEN} are open already")
        resolved = resolve_cleared(
            document, seen.kinds, found_keys, seen.unknown, now, by, judged=seen.judged
        )
        return Outcome(opened, bumped, resolved, problems)

    return book.change(edit)
