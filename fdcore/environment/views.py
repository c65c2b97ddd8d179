"""What an environment shows: its agents, its queue, its schedules and a request's story, as
plain rows.

The same rows feed the commands' human tables, their ``--json`` output (docs/agents.md,
"``--json`` output") and the monitor's pages and ``/metrics``, so none of them disagree. The
queue's rows are read by :mod:`fdcore.environment.queue`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from fdcore.abc import HostSlots
from fdcore.contract.codec import format_time, to_dict
from fdcore.contract.layout import agent_key
from fdcore.contract.models import (
    AgentRecord,
    Cancel,
    LastJob,
    Request,
    RunRecord,
    ScheduleInfo,
    State,
    Status,
)
from fdcore.contract.schedules import schedule_conflicts, tables_text
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.cancel import known_request
from fdcore.mailbox.verdict import AgentVerdicts
from fdcore.plugins.manager import HOST, load_plugins

__all__ = [
    "AgentRow",
    "AttemptStory",
    "QueueRow",
    "RequestStory",
    "RunStory",
    "ScheduleRow",
    "agent_rows",
    "describe_attempts",
    "queue_row",
    "request_story",
    "run_story",
    "schedule_rows",
    "schedule_warnings",
    "shared_by",
    "with_host_folder",
    "with_host_slots",
]


@attrs.frozen
class AgentRow:
    """One agent as ``fdcore agents`` shows it, from its record: its state, work and settings."""

    name: str
    state: str  # live, stale, lost, stopped, unreadable
    version: str | None
    last_seen: datetime | None
    running: int
    concurrency: int
    claim: str | None
    take_over: bool
    requests: list[str]
    record: AgentRecord | None = attrs.field(repr=False, eq=False)
    # the execution slots of its host (docs/host.md), for agents on this machine with --host
    configured_slots: int | None = None
    busy_slots: int | None = None
    clock_skew: float | None = None  # its clock minus the store's, as it last measured

    @property
    def owner(self) -> str | None:
        """Who to call about it, as its record says (``[agent] owner``)."""
        return self.record.owner if self.record else None

    @property
    def last_jobs(self) -> list[LastJob] | None:
        """Its last table runs, newest last (None: its record does not say)."""
        return self.record.last_jobs if self.record else None

    def to_json(self) -> dict[str, Any]:
        """The row as ``fdcore agents --json`` prints it (docs/agents.md)."""
        jobs = self.last_jobs
        return {
            "name": self.name,
            "state": self.state,
            "version": self.version,
            "last_seen": format_time(self.last_seen) if self.last_seen else None,
            "running": self.running,
            "concurrency": self.concurrency,
            "claim": self.claim,
            "take_over": self.take_over,
            "requests": self.requests,
            "configured_slots": self.configured_slots,
            "busy_slots": self.busy_slots,
            "clock_skew": self.clock_skew,
            "owner": self.owner,
            "last_jobs": None if jobs is None else [to_dict(job) for job in jobs],
        }


def with_host_slots(rows: list[AgentRow], slots: HostSlots, hostname: str) -> list[AgentRow]:
    """The rows, those of agents on ``hostname`` (their records say so) with its host's slots."""
    return [
        attrs.evolve(row, configured_slots=slots.configured, busy_slots=slots.busy)
        if row.record is not None and row.record.host == hostname
        else row
        for row in rows
    ]


def with_host_folder(rows: list[AgentRow], host: str, admission: str) -> list[AgentRow]:
    """The rows, this machine's agents with the slots of the host folder ``host`` (read through
    the host admission ``admission``, docs/host.md); unchanged if it keeps no slots."""
    options = {"agent": "fdcore-agents", "lease_seconds": 0.0}
    slots = load_plugins().get(HOST, admission).open(host, options).slots()
    return rows if slots is None else with_host_slots(rows, slots, socket.gethostname())


def agent_rows(
    mailbox: Mailbox,
    now: datetime,
    verdicts: AgentVerdicts,
    grace: float,
    queue: Iterable[QueueRow] | None = None,
) -> list[AgentRow]:
    """One row per agent record, by name; an agent is lost when its fleet's takeover policy
    says so (``verdicts``; ``stale_record``: past ``stale_after`` plus ``grace`` seconds).

    With the ``queue`` read now, each row's ``running`` and ``requests`` are what the statuses
    say the agent holds (running, and accepted or running); without it, what its record said
    when last written, which may be ``stale_after / 4`` old.
    """
    held: dict[str, list[QueueRow]] = {}
    for request in queue or ():
        if request.agent is not None and request.state in ("accepted", "running"):
            held.setdefault(request.agent, []).append(request)
    rows = []
    for name in sorted(mailbox.agent_names()):
        found = mailbox.read_or_report(AgentRecord, agent_key(name))
        record = found.value if found else None
        row = AgentRow(
            name=name,
            state=verdicts.state(record, now, grace),
            version=record.version if record else None,
            last_seen=record.updated_at if record else None,
            running=record.running if record else 0,
            concurrency=record.concurrency if record else 0,
            claim=record.claim if record else None,
            take_over=record.take_over if record else False,
            requests=list(record.requests) if record else [],
            record=record,
            clock_skew=record.clock_skew if record else None,
        )
        if queue is not None:
            mine = held.get(name, [])
            row = attrs.evolve(
                row,
                running=sum(1 for each in mine if each.state == "running"),
                requests=sorted(each.id for each in mine),
            )
        rows.append(row)
    return rows


@attrs.frozen
class AttemptStory:
    """One agent's attempt at a request, from its status: what the queue and a request's story
    show of it."""

    number: int
    agent: str
    started_at: datetime | None
    ended_at: datetime | None
    outcome: str
    message: str | None

    def to_json(self, *, brief: bool = False) -> dict[str, Any]:
        """The attempt as ``fdcore show --json`` prints it in ``attempts`` (docs/agents.md);
        ``brief``: as ``fdcore queue --json`` does, its number, agent and outcome alone."""
        if brief:
            return {"number": self.number, "agent": self.agent, "outcome": self.outcome}
        return {
            "number": self.number,
            "agent": self.agent,
            "started_at": format_time(self.started_at) if self.started_at else None,
            "ended_at": format_time(self.ended_at) if self.ended_at else None,
            "outcome": self.outcome,
            "message": self.message,
        }


@attrs.frozen
class QueueRow:
    """One request as ``fdcore queue`` shows it: its state, agent, attempts and schedule slot."""

    id: str
    state: str  # a status state, or "waiting" (no status yet), or "unreadable"
    agent: str | None
    attempts: list[AttemptStory]
    schedule: str | None
    slot: str | None
    created_at: datetime | None
    deadline: datetime | None
    message: str | None
    # who cancelled it, while its holder has yet to stop it (``fdcore cancel``)
    cancelled_by: str | None = None
    archived: str | None = None  # the archive day folder (YYYY/MM/DD); None: live
    # why its cancel file is no cancel (malformed): agents report it and run the request
    cancel_problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as ``fdcore queue --json`` prints it (docs/agents.md)."""
        return {
            "id": self.id,
            "state": self.state,
            "agent": self.agent,
            "attempts": [attempt.to_json(brief=True) for attempt in self.attempts],
            "schedule": self.schedule,
            "slot": self.slot,
            "created_at": format_time(self.created_at) if self.created_at else None,
            "deadline": format_time(self.deadline) if self.deadline else None,
            "message": self.message,
            "cancelled_by": self.cancelled_by,
            "archived": self.archived,
            "cancel_problem": self.cancel_problem,
        }


def describe_attempts(row: QueueRow, agents: dict[str, str]) -> str:
    """``etl-01 lost, etl-02 running``: each attempt's agent and how it ended."""
    parts = []
    for attempt in row.attempts:
        outcome = attempt.outcome
        if outcome == "running" and agents.get(attempt.agent) == "lost":
            outcome = "lost?"  # its agent is lost; nobody has taken it over yet
        parts.append(f"{attempt.agent} {outcome}")
    return ", ".join(parts)


def queue_row(
    request_id: str,
    request: Request | None,
    status: Status | None,
    problem: str | None,
    archived: str | None = None,
) -> QueueRow:
    """The row of one request from its files (``problem``: why one of them is unreadable)."""
    # An unreadable status leaves its request stuck: say so, never "waiting".
    if request is None or problem is not None:
        state = "unreadable"
    elif status is None:
        state = "waiting"
    else:
        state = status.state.value
    return QueueRow(
        id=request_id,
        state=state,
        agent=status.agent if status else None,
        attempts=attempts_of(status),
        schedule=request.schedule.id if request and request.schedule else None,
        slot=request.schedule.slot if request and request.schedule else None,
        created_at=request.created_at if request else None,
        deadline=request.deadline if request else None,
        message=problem or (status.message if status else None),
        archived=archived,
    )


@attrs.frozen
class ScheduleRow:
    """One schedule id as the agents' records show it."""

    id: str
    shared: bool
    when: str
    entities: list[str] | None  # None: no agent's record says (older agents): unknown
    agents: list[str]  # agents (not stopped) that hold a copy
    next_due: datetime | None
    owner: str | None = None  # who to call about it, as the first copy naming one says

    @property
    def tables(self) -> str:
        """The tables as the views print them: ``unknown``, ``all`` or the names."""
        return tables_text(self.entities)

    def to_json(self) -> dict[str, Any]:
        """The row as ``fdcore schedules --json`` prints it (docs/agents.md)."""
        return {
            "id": self.id,
            "shared": self.shared,
            "when": self.when,
            "entities": self.entities,
            "agents": self.agents,
            "next_due": format_time(self.next_due) if self.next_due else None,
            "owner": self.owner,
        }


def _copies(agents: list[AgentRow]) -> dict[str, list[tuple[str, ScheduleInfo]]]:
    """Each schedule id with the copies held by agents that have not stopped."""
    copies: dict[str, list[tuple[str, ScheduleInfo]]] = {}
    for row in agents:
        if row.record is None or row.state == "stopped":
            continue
        for info in row.record.schedules:
            copies.setdefault(info.id, []).append((row.name, info))
    return copies


def schedule_rows(agents: list[AgentRow]) -> list[ScheduleRow]:
    """One row per schedule id the agents' records name, with the agents serving it."""
    rows = []
    for schedule_id, copies in sorted(_copies(agents).items()):
        first = copies[0][1]
        known = [info.entities for _, info in copies if info.entities is not None]
        owners = [info.owner for _, info in copies if info.owner]
        due = [info.next_due for _, info in copies if info.next_due is not None]
        rows.append(
            ScheduleRow(
                id=schedule_id,
                shared=all(info.shared for _, info in copies),
                when=first.when,
                entities=list(known[0]) if known else None,
                agents=[name for name, _ in copies],
                next_due=min(due) if due else None,
                owner=owners[0] if owners else None,
            )
        )
    return rows


def schedule_warnings(agents: list[AgentRow]) -> list[str]:
    """What operators must hear about schedule copies across agents (see
    :func:`fdcore.contract.schedules.schedule_conflicts`)."""
    return list(schedule_conflicts(_copies(agents)).values())


def shared_by(agents: list[AgentRow]) -> dict[str, list[str]]:
    """Shared schedule id -> the agents serving it, for the queue's "Shared by" column."""
    return {row.id: row.agents for row in schedule_rows(agents) if row.shared and row.agents}


@attrs.frozen
class RunStory:
    """One table run of a request, from its run record."""

    table: str
    agent: str
    attempt: int
    fencing_token: int  # the table lease's generation it ran under
    started_at: datetime
    ended_at: datetime
    outcome: str
    exit_code: int | None
    message: str | None
    output: str | None  # the last lines of the runner's output (stderr; at most 4 KiB)
    stdout: str | None = None  # a failed table's last lines of stdout (at most 4 KiB)
    run_as: str | None = None  # the identity it ran as (None: an older agent's record)
    release: dict[str, str] | None = None  # fdcore's and its plugins' versions that ran it
    # the store operations its agent made for it, by kind (None: an agent that did not count)
    operations: dict[str, int] | None = None
    compute_per_hour: float | None = None  # its agent's compute rate then (dollars an hour)

    @property
    def seconds(self) -> float:
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def store_operations(self) -> int | None:
        """Its store operations of every kind (None: its agent did not count them)."""
        return sum(self.operations.values()) if self.operations is not None else None

    @property
    def version(self) -> str | None:
        """The fdcore version that ran it (None: its record does not say)."""
        return self.release.get("fdcore") if self.release else None

    def to_json(self) -> dict[str, Any]:
        """The run as ``fdcore show --json`` prints it in ``runs`` (docs/agents.md)."""
        return {
            "table": self.table,
            "agent": self.agent,
            "attempt": self.attempt,
            "fencing_token": self.fencing_token,
            "started_at": format_time(self.started_at),
            "ended_at": format_time(self.ended_at),
            "seconds": round(self.seconds, 3),
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "message": self.message,
            "output": self.output,
            "stdout": self.stdout,
            "run_as": self.run_as,
            "release": self.release,
            "operations": self.operations,
            "compute_per_hour": self.compute_per_hour,
        }


def run_story(run: RunRecord) -> RunStory:
    """A run record as a request's story shows it."""
    return RunStory(
        table=run.table,
        agent=run.agent,
        attempt=run.attempt,
        fencing_token=run.generation,
        started_at=run.started_at,
        ended_at=run.ended_at,
        outcome=run.outcome.value,
        exit_code=run.exit_code,
        message=run.message,
        output=run.output,
        stdout=run.stdout,
        run_as=run.run_as,
        release=run.release,
        operations=run.operations,
        compute_per_hour=run.compute_per_hour,
    )


@attrs.frozen
class RequestStory:
    """A request's whole story: what it asked, who tried it, every table run, how it ended."""

    request: Request
    state: str  # a status state, or "waiting" (no status yet)
    agent: str | None  # its holder now
    tables_done: list[str]
    attempts: list[AttemptStory]
    runs: list[RunStory]  # oldest first
    cancel: Cancel | None
    retried_as: str | None  # the request that runs this one again (``fdcore retry``)
    why: str | None  # why it ended (or what holds it up), in a sentence
    archived: str | None = None  # the archive day folder retention moved it to; None: live
    problems: list[str] = attrs.field(factory=list)  # its files that are not what they say

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def release_changes(self) -> list[str]:
        """Each change of release between one attempt's table runs and the next's, as
        ``attempt 2: fdcore 0.1.0 -> 0.2.0``; runs whose record names none are skipped."""
        changes = []
        last: dict[str, str] | None = None
        for run in sorted(self.runs, key=lambda run: (run.attempt, run.started_at)):
            if run.release is None:
                continue
            if last is not None and run.release != last:
                moved = [
                    f"{name} {last.get(name, '-')} -> {run.release.get(name, '-')}"
                    for name in sorted(set(last) | set(run.release))
                    if last.get(name) != run.release.get(name)
                ]
                changes.append(f"attempt {run.attempt} ({run.agent}): {', '.join(moved)}")
            last = run.release
        return changes

    def to_json(self) -> dict[str, Any]:
        """The story as ``fdcore show --json`` prints it (docs/agents.md)."""
        request = self.request
        return {
            "id": request.id,
            "state": self.state,
            "agent": self.agent,
            "tables": list(request.entities),
            "tables_done": self.tables_done,
            "created_at": format_time(request.created_at),
            "created_by": request.created_by,
            "deadline": format_time(request.deadline) if request.deadline else None,
            "schedule": request.schedule.id if request.schedule else None,
            "slot": request.schedule.slot if request.schedule else None,
            "retry_of": request.retry_of,
            "retried_as": self.retried_as,
            "cancel": (
                {
                    "by": self.cancel.by,
                    "at": format_time(self.cancel.at),
                    "reason": self.cancel.reason,
                }
                if self.cancel
                else None
            ),
            "attempts": [attempt.to_json() for attempt in self.attempts],
            "runs": [run.to_json() for run in self.runs],
            "release_changes": self.release_changes,
            "why": self.why,
            "archived": self.archived,
            "problems": self.problems,
        }


def request_story(mailbox: Mailbox, request_id: str) -> RequestStory:
    """The story of one request, live or archived by retention (its request, status, run
    records, cancel and retry link). :class:`~fdcore.errors.UnknownRequest` if there is no such
    request; a malformed file raises its :class:`~fdcore.errors.MailboxFileError`."""
    files = known_request(mailbox, request_id)
    request, status, cancel, retry = files.request, files.status, files.cancel, files.retry
    assert request is not None  # known_request refuses a request whose file is gone
    runs = sorted(files.runs, key=lambda r: (r.started_at, r.attempt, r.ended_at, r.table))
    return RequestStory(
        request=request,
        state=status.state.value if status else "waiting",
        agent=status.agent if status else None,
        tables_done=list(status.tables_done) if status else [],
        attempts=attempts_of(status),
        runs=[run_story(run) for run in runs],
        cancel=cancel,
        retried_as=retry.retry if retry else None,
        why=_why(request, status, cancel),
        archived=files.day,
        problems=[f"not a cancel: {files.cancel_problem}"] if files.cancel_problem else [],
    )


def attempts_of(status: Status | None) -> list[AttemptStory]:
    """Each attempt ``status`` records, oldest first."""
    if status is None:
        return []
    if not status.attempts and status.agent:
        # A status from an older agent keeps no attempt list: the one it implies.
        outcome = status.state.value if status.state.final else "running"
        return [AttemptStory(status.attempt, status.agent, None, None, outcome, None)]
    return [
        AttemptStory(a.number, a.agent, a.started_at, a.ended_at, a.outcome.value, a.message)
        for a in status.attempts
    ]


def _why(request: Request, status: Status | None, cancel: Cancel | None) -> str | None:
    """Why the request ended, or what it waits for."""
    if status is None:
        return cancel.describe() + "; not ended yet" if cancel else "waiting to be claimed"
    if status.state is State.SUCCEEDED:
        return f"all {len(request.entities)} tables succeeded"
    if status.state.final:
        return status.message or (cancel.describe() if cancel else status.state.value)
    if cancel is not None:
        return f"{cancel.describe()}; its holder {status.agent} stops it at its next poll"
    return None
