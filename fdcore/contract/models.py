"""The mailbox files, as attrs classes: mailbox contract 1 and status contract 1.

Every field beyond the first version is optional with a default, so files from an older agent
read as before. ``extra`` holds the fields this version does not know; they are written back
unchanged when a file is rewritten (see :mod:`fdcore.contract.codec`).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

import attrs

from fdcore.contract.ids import validate_id
from fdcore.durations import MAX_SECONDS
from fdcore.pricing import KINDS

__all__ = [
    "AUDIT_ACTIONS",
    "AUDIT_ORIGINS",
    "MAX_AUDIT_TEXT",
    "MAX_OUTPUT_BYTES",
    "MAX_SECONDS",
    "AgentRecord",
    "ArchiveEntry",
    "Attempt",
    "AuditEvent",
    "Cancel",
    "Incident",
    "IncidentDelivery",
    "IncidentDocument",
    "IncidentNote",
    "IncidentState",
    "LastJob",
    "Lease",
    "Outcome",
    "Request",
    "Retry",
    "RunRecord",
    "ScheduleInfo",
    "ScheduleRef",
    "State",
    "Status",
    "output_tail",
]


def _id(what: str) -> Any:
    def check(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
        validate_id(value, what, attribute.name)

    return check


def _optional_id(what: str) -> Any:
    def check(_instance: object, attribute: attrs.Attribute[str], value: str | None) -> None:
        if value is not None:
            validate_id(value, what, attribute.name)

    return check


def _ids(what: str) -> Any:
    def check(_instance: object, attribute: attrs.Attribute[str], value: list[str]) -> None:
        for item in value:
            validate_id(item, what, attribute.name)

    return check


# The longest span of seconds a file may state (``stale_after``) is the bound of every duration
# a person types (fdcore.durations.MAX_SECONDS, ten years), so any value an agent writes is read.


def _seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0 < value <= MAX_SECONDS:
        raise ValueError(f"{attribute.name} must be in (0, {MAX_SECONDS}] seconds, got {value!r}")


def _optional_skew(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not -MAX_SECONDS <= value <= MAX_SECONDS:
        raise ValueError(f"{attribute.name} must be within {MAX_SECONDS} seconds, got {value!r}")


#: The most store operations of one kind a record may state (far beyond any agent's life).
MAX_OPERATIONS = 10**15
#: The highest compute rate a record may state, in dollars per hour.
MAX_COMPUTE_PER_HOUR = 1e6


def _operations(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Store operations by kind (fdcore.pricing's kinds), each a whole number, 0 or more."""
    if value is None:
        return
    for kind, count in value.items():
        if kind not in KINDS:
            raise ValueError(f"{attribute.name}: {kind!r} is not an operation ({', '.join(KINDS)})")
        if not 0 <= count <= MAX_OPERATIONS:
            raise ValueError(f"{attribute.name}: {kind} must be in [0, {MAX_OPERATIONS}]")


def _rate(_instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not 0 <= value <= MAX_COMPUTE_PER_HOUR:
        raise ValueError(
            f"{attribute.name} must be in [0, {MAX_COMPUTE_PER_HOUR:g}] dollars an hour, "
            f"got {value!r}"
        )


#: The most of a table runner's output a run record keeps (its last lines), in UTF-8 bytes.
MAX_OUTPUT_BYTES = 4096


def _output_tail(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_OUTPUT_BYTES:
        raise ValueError(f"{attribute.name} must be at most {MAX_OUTPUT_BYTES} bytes")


def output_tail(text: str, limit: int = MAX_OUTPUT_BYTES) -> str:
    """The last whole lines of ``text`` that fit in ``limit`` bytes (:data:`MAX_OUTPUT_BYTES`)."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    if limit <= 0:
        return ""
    tail = data[-limit:].decode("utf-8", "ignore")
    _, newline, rest = tail.partition("\n")
    return rest if newline else tail


def _day(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    try:
        datetime.strptime(value, "%Y/%m/%d")
    except (TypeError, ValueError):
        raise ValueError(f"{attribute.name} must be YYYY/MM/DD, got {value!r}") from None


def _extra() -> Any:
    return attrs.field(factory=dict, kw_only=True, repr=False)


class State(str, enum.Enum):
    """A request's state in its status file. The last four are final."""

    ACCEPTED = "accepted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self not in (State.ACCEPTED, State.RUNNING)


@attrs.define
class ScheduleRef:
    """Which schedule slot a request was made for."""

    id: str = attrs.field(validator=_id("schedule id"))
    slot: str
    extra: dict[str, Any] = _extra()


@attrs.define
class Request:
    """``requests/<id>.json``: work to do, one table (entity) after another."""

    id: str = attrs.field(validator=_id("request id"))
    entities: list[str] = attrs.field(validator=_ids("table name"))
    created_at: datetime
    contract: int = 1
    created_by: str | None = None
    deadline: datetime | None = None
    schedule: ScheduleRef | None = None
    max_attempts: int | None = None
    affinity: str | None = None
    # the request this one runs again (``fdcore retry``); ``retries/<that id>.json`` links back
    retry_of: str | None = attrs.field(default=None, validator=_optional_id("request id"))
    extra: dict[str, Any] = _extra()


class Outcome(str, enum.Enum):
    """How one attempt (or one table run) ended."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"  # its agent stopped reporting and another agent took the request over
    STOPPED = "stopped"  # the agent found the request no longer its own and stopped
    CANCELLED = "cancelled"  # an operator cancelled the request (``cancels/<id>.json``)


@attrs.define
class Attempt:
    """One agent's attempt at a request, kept in the status file's ``attempts`` list."""

    number: int
    agent: str
    started_at: datetime
    ended_at: datetime | None = None
    outcome: Outcome = Outcome.RUNNING
    message: str | None = None
    instance: str | None = None  # the agent process that made it (tells its own writes apart)
    extra: dict[str, Any] = _extra()


@attrs.define
class Status:
    """``status/<id>.json``: who holds a request and how far it got. Created by the claim."""

    request: str = attrs.field(validator=_id("request id"))
    state: State
    updated_at: datetime
    # None when nobody holds it: expired unclaimed, or handed back by a stopping agent.
    agent: str | None = attrs.field(default=None, validator=_optional_id("agent name"))
    contract: int = 1
    attempt: int = 1
    attempts: list[Attempt] = attrs.field(factory=list)
    tables_done: list[str] = attrs.field(factory=list)
    message: str | None = None
    extra: dict[str, Any] = _extra()

    @classmethod
    def ended_unclaimed(cls, request: str, state: State, message: str, now: datetime) -> Status:
        """The final status of a request no agent ever held (expired, cancelled): attempt 0."""
        return cls(request=request, state=state, updated_at=now, attempt=0, message=message)


@attrs.define
class ScheduleInfo:
    """A schedule as an agent publishes it in its status record."""

    id: str = attrs.field(validator=_id("schedule id"))
    shared: bool
    when: str
    # None: the record does not say (an older agent's); [] is every table (FDCORE_TABLE=all)
    entities: list[str] | None = None
    fingerprint: str = ""
    next_due: datetime | None = None
    owner: str | None = None  # who to call about it (the agent's owner unless it names one)
    extra: dict[str, Any] = _extra()


@attrs.define
class LastJob:
    """One of the last table runs an agent ended, kept in its status record (newest last)."""

    request: str = attrs.field(validator=_id("request id"))
    table: str = attrs.field(validator=_id("table name"))
    outcome: Outcome
    ended_at: datetime
    extra: dict[str, Any] = _extra()


@attrs.define
class AgentRecord:
    """``agents/<name>.json``: an agent's status record, rewritten by it every poll."""

    name: str = attrs.field(validator=_id("agent name"))
    updated_at: datetime
    stale_after: float = attrs.field(validator=_seconds)
    contract: int = 1
    version: str | None = None
    instance: str | None = None  # random per process: a second process of one name is refused
    host: str | None = None
    pid: int | None = None
    started_at: datetime | None = None
    concurrency: int = 1
    running: int = 0
    requests: list[str] = attrs.field(factory=list)
    claim: str | None = None
    take_over: bool = False
    # the takeover policy its fleet judges it (and others) by ([pipeline] takeover_policy)
    takeover_policy: str | None = None
    stopping: bool = False
    stopped_at: datetime | None = None  # set by a clean exit: the agent holds nothing
    schedules: list[ScheduleInfo] = attrs.field(factory=list)
    # Its clock minus the store's, as last measured (seconds; None: the store gives no time).
    clock_skew: float | None = attrs.field(default=None, validator=_optional_skew)
    owner: str | None = None  # who to call about it ([agent] owner)
    # its last few table runs, newest last (None: an agent that does not say)
    last_jobs: list[LastJob] | None = None
    # The store operations this agent (every process under its name) made since
    # ``operations_since``, by kind, up to this write (None: an agent that does not count them)
    operations: dict[str, int] | None = attrs.field(default=None, validator=_operations)
    operations_since: datetime | None = None
    extra: dict[str, Any] = _extra()


@attrs.define
class Lease:
    """``leases/<table>.json``: who may write a table, until when, under which fencing token."""

    table: str = attrs.field(validator=_id("table name"))
    holder: str = attrs.field(validator=_id("agent name"))
    request: str
    attempt: int
    acquired_at: datetime
    expires_at: datetime
    generation: int
    contract: int = 1
    released: bool = False
    extra: dict[str, Any] = _extra()


@attrs.define
class RunRecord:
    """``runs/<request>/<attempt>-<table>.json``: the run log, one record per table run."""

    request: str
    table: str
    agent: str
    attempt: int
    generation: int
    started_at: datetime
    ended_at: datetime
    outcome: Outcome
    contract: int = 1
    message: str | None = None
    exit_code: int | None = None  # a command runner's table process
    output: str | None = attrs.field(default=None, validator=_output_tail)  # its last lines
    # a failed table's last lines of stdout (output: of stderr)
    stdout: str | None = attrs.field(default=None, validator=_output_tail)
    run_as: str | None = None  # the identity it ran as ([runner] run_as, else user@host)
    # the release that ran it: {"fdcore": version, <plugin distribution>: version}
    release: dict[str, str] | None = None
    # The store operations the agent made for this table (its lease, status changes and this
    # record), by kind; None: an agent that does not count them (docs/operations.md)
    operations: dict[str, int] | None = attrs.field(default=None, validator=_operations)
    # the agent's compute rate when it ran ([agent] compute_per_hour, dollars an hour)
    compute_per_hour: float | None = attrs.field(default=None, validator=_rate)
    extra: dict[str, Any] = _extra()


@attrs.define
class Cancel:
    """``cancels/<id>.json``: an operator asked to stop a request. Created once (create-if-absent),
    never changed; its holder stops it at its next poll, and nobody claims it any more."""

    request: str = attrs.field(validator=_id("request id"))
    by: str
    at: datetime
    contract: int = 1
    reason: str | None = None
    extra: dict[str, Any] = _extra()

    def describe(self) -> str:
        """``cancelled by ann: wrong tables``: the status message of a cancelled request."""
        return f"cancelled by {self.by}" + (f": {self.reason}" if self.reason else "")


@attrs.define
class Retry:
    """``retries/<id>.json``: the request ``retry`` runs request ``<id>`` again. Created once
    (create-if-absent) before that request, so a request is retried at most once; a retry that
    fails is retried in turn. The new request names the old one in ``retry_of``."""

    request: str = attrs.field(validator=_id("request id"))
    retry: str = attrs.field(validator=_id("request id"))
    by: str
    at: datetime
    contract: int = 1
    from_table: str | None = attrs.field(default=None, validator=_optional_id("table name"))
    extra: dict[str, Any] = _extra()


#: The workload actions the audit trail records (``audit/<id>.json``).
AUDIT_ACTIONS = (
    "submit",
    "cancel",
    "retry",
    "acknowledge",
    "takeover",
    "expire",
    "archive",
    "delete",
    "set-slots",
)
#: Where an action came from: a command, the Python API, the monitor's page, or an agent.
AUDIT_ORIGINS = ("cli", "python", "monitor", "agent")
#: The longest text an audit event's who, what and outcome may hold (characters).
MAX_AUDIT_TEXT = 512


def _audit_text(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    # Shown to people and sent to a SIEM line by line: one printable line, bounded.
    if value is not None and (len(value) > MAX_AUDIT_TEXT or not value.isprintable()):
        raise ValueError(
            f"{attribute.name} must be one printable line of at most {MAX_AUDIT_TEXT} characters"
        )


@attrs.define
class AuditEvent:
    """``audit/<id>.json``: one workload action, created once (create-if-absent), never changed.

    ``id`` begins with its writer's time (``20260901T000000123Z-<random>``), so names sort by
    time. ``actor`` is who acted as the writer knew it (an operator's ``user@host``, what a
    Python caller passed, an agent's name); ``process`` is the ``user@host`` of the process that
    wrote it, when that is not the actor. Readers check what they can (docs/operations.md).
    """

    id: str = attrs.field(validator=_id("audit event id"))
    action: str = attrs.field(validator=_audit_text)
    subject: str = attrs.field(validator=_audit_text)  # the request, incident or host acted on
    actor: str = attrs.field(validator=_audit_text)
    via: str = attrs.field(validator=_audit_text)  # cli, python, monitor or agent
    at: datetime
    outcome: str = attrs.field(default="ok", validator=_audit_text)
    contract: int = 1
    request: str | None = attrs.field(default=None, validator=_optional_id("request id"))
    process: str | None = attrs.field(default=None, validator=_audit_text)
    detail: str | None = attrs.field(default=None, validator=_audit_text)
    extra: dict[str, Any] = _extra()


@attrs.define
class ArchiveEntry:
    """``archive/index/<id>.json``: where an archived request's files are.

    Written by retention once every file of the request is copied to ``archive/<day>/``, before
    any live copy is deleted: while it exists the archive copy is complete and is the one
    readers use (docs/retention.md).
    """

    request: str = attrs.field(validator=_id("request id"))
    day: str = attrs.field(validator=_day)  # YYYY/MM/DD
    archived_at: datetime
    runs: int = 0  # run records archived with it
    contract: int = 1
    extra: dict[str, Any] = _extra()


#: The kinds of incident (``Incident.kind``): what a route's ``kinds`` may name.
AGENT_OFFLINE = "agent_offline"
REQUEST_FAILED = "request_failed"
SLOT_MISSED = "slot_missed"
SCHEDULE_CONFLICT = "schedule_conflict"
OBJECTIVE = "objective"
INCIDENT_KINDS = (AGENT_OFFLINE, REQUEST_FAILED, SLOT_MISSED, SCHEDULE_CONFLICT, OBJECTIVE)


class IncidentState(str, enum.Enum):
    """Where an incident is in its lifecycle."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"  # a person knows; still open, never escalated
    RESOLVED = "resolved"


@attrs.define
class IncidentNote:
    """A note on an incident (a mitigation, a hand-over)."""

    at: datetime
    by: str
    text: str
    extra: dict[str, Any] = _extra()


@attrs.define
class IncidentDelivery:
    """One route's notification of an incident: claimed in the document before it is sent, so of
    several agents exactly one sends it; ``error`` says why it did not arrive."""

    route: str
    at: datetime
    by: str
    escalation: bool = False
    error: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.define
class Incident:
    """One incident in the environment's incident document.

    ``key`` is the dedup key (``<kind>:<subject>``): while an incident with a key is open or
    acknowledged, seeing it again moves ``last_seen``; ``count`` counts occurrences (a new
    failure, a new lost spell: a condition that began after ``began_at``), not sightings.
    ``opened_at`` is first seen.
    """

    id: str
    key: str
    title: str
    opened_at: datetime
    opened_by: str
    severity: str = "error"
    acknowledged_by: str | None = None
    acknowledged_at: datetime | None = None
    resolved_at: datetime | None = None
    notified: list[str] = attrs.field(factory=list)  # routes notified (deliveries has details)
    kind: str | None = None
    subject: str | None = None
    message: str | None = None
    state: IncidentState = IncidentState.OPEN
    last_seen: datetime | None = None
    count: int = 1  # occurrences of the condition while open, not evaluations that saw it
    resolved_by: str | None = None
    notes: list[IncidentNote] = attrs.field(factory=list)
    deliveries: list[IncidentDelivery] = attrs.field(factory=list)
    began_at: datetime | None = None  # when its latest counted occurrence began, if known
    extra: dict[str, Any] = _extra()


@attrs.define
class IncidentDocument:
    """``incidents/incidents.json``: open incidents and the last 200 resolved; If-Match only."""

    open: list[Incident] = attrs.field(factory=list)
    resolved: list[Incident] = attrs.field(factory=list)
    contract: int = 1
    last_number: int = 0  # the number of the last incident id handed out (inc-0007 -> 7)
    extra: dict[str, Any] = _extra()

    RESOLVED_KEPT = 200
