"""What an agent is told: ``agent.toml``, declared once, and the settings the agent reads.

:class:`AgentToml` declares the file, table by table (``[agent]``, ``[storage]``,
``[pipeline]``, ``[runner]``, ``[[schedules]]``, ``[notify.routes.<name>]``, ``[incidents]``,
``[retention]``): each key with its default, its checks and its help
(:mod:`fdcore.settings.declare`).
:meth:`AgentToml.settings` gives the agent's :class:`AgentConfig`, whose defaults are the
declared ones. Reading the file is the command line's job (:mod:`fdcore.cli.config`); the agent
and the simulator only ever see these values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import time
from typing import Any, ClassVar

import attrs

from fdcore.contract.limits import MAX_ATTEMPTS
from fdcore.contract.models import INCIDENT_KINDS, MAX_COMPUTE_PER_HOUR
from fdcore.durations import format_duration
from fdcore.errors import ConfigError
from fdcore.settings.checks import (
    GRACE,
    AnId,
    Duration,
    FileBound,
    Invalid,
    NonEmpty,
    Number,
    OneOf,
    Portion,
    Seconds,
    Text,
    TimeZone,
    Whole,
)
from fdcore.settings.declare import default_of, setting
from fdcore.settings.variables import operator_file_bound

__all__ = [
    "MAX_CONCURRENCY",
    "MIN_POLL_SECONDS",
    "OUR_SLOT_FUNCTIONS",
    "AgentConfig",
    "AgentTable",
    "AgentToml",
    "IncidentsConfig",
    "NotifyTable",
    "Objective",
    "PipelineTable",
    "QuietHours",
    "RetentionConfig",
    "RouteConfig",
    "RunnerTable",
    "ScheduleConfig",
    "ScheduleTable",
    "StorageTable",
]

MIN_POLL_SECONDS = 0.01
MIN_STALE_AFTER = 0.1
POLLS_PER_STALE = 3  # a heartbeat may be missed twice before its agent looks lost
POLLS_PER_LEASE = 3  # a lease is renewed at half its time, and at least one poll before that
MAX_CONCURRENCY = 1024
MIN_RETENTION_EVERY = 60.0
MAX_RETENTION_BATCH = 10_000


#: The longest ``owner`` (a person or team to call, shown by the views and incidents).
MAX_OWNER_CHARACTERS = 128
_OWNER = Text(MAX_OWNER_CHARACTERS)
#: The slot functions fdcore-slots gives (a schedule's timing keys), for editors' schema.
OUR_SLOT_FUNCTIONS = ("every", "cron", "daily", "weekly")


# -- the tables the agent reads as they are ------------------------------------------------------


@attrs.frozen
class ScheduleTable:
    """One ``[[schedules]]`` table: its requests, and exactly one timing key (the name of an
    installed slot function: every, cron, daily, weekly, or a plugin's)."""

    id: str = setting(help="the schedule's id (names its requests)", check=AnId("schedule id"))
    shared: bool = setting(False, help="true: one request per slot for every agent that has it")
    entities: tuple[str, ...] = setting(
        (), help="its tables; empty: one run for every table", check=AnId("table name")
    )
    timezone: str | None = setting(
        None, help='the slot function\'s time zone, e.g. "Europe/Berlin"'
    )
    deadline: str | None = setting(None, help='how long a slot\'s request may wait, e.g. "6h"')
    owner: str | None = setting(
        None, help="who to call about it (default: the agent's owner)", check=_OWNER
    )
    run_as: str | None = setting(
        None,
        help="the identity its tables run as (default: [runner] run_as); the runner gets it"
        " as FDCORE_RUN_AS",
        check=_OWNER,
    )
    timing: dict[str, str] = setting(
        factory=dict,
        help="exactly one timing key: an installed slot function (every, cron, daily, weekly"
        " or a plugin's)",
        rest=True,
    )

    @staticmethod
    def schema_extra() -> dict[str, Any]:
        """For editors: every slot function of fdcore-slots, one of them required."""
        names = list(OUR_SLOT_FUNCTIONS)
        return {
            "additionalProperties": {"type": "string"},
            "oneOf": [{"required": [name]} for name in names],
        }


@attrs.frozen
class ScheduleConfig:
    """One schedule, as the agent runs it (its timing key split into ``timing`` and ``spec``)."""

    id: str
    entities: tuple[str, ...]
    timing: str  # the slot function's name (every, cron, daily, weekly or a plugin's)
    spec: str  # its value, e.g. "1h"
    shared: bool = default_of(ScheduleTable, "shared")
    options: Mapping[str, Any] = attrs.field(factory=dict)  # timezone, deadline
    owner: str | None = None  # None: the agent's owner
    run_as: str | None = None  # None: the runner's run_as


@attrs.frozen
class QuietHours:
    """``quiet_hours = {start = "22:00", end = "07:00", timezone = "Europe/Berlin"}``: posts due
    inside are deferred to ``end`` (a span past midnight wraps)."""

    inline: ClassVar[bool] = True  # an inline table of a route, not a table of its own

    start: time = setting(help='"HH:MM"', expects='a time such as "22:00"')
    end: time = setting(help='"HH:MM"', expects='a time such as "22:00"')
    timezone: str = setting("UTC", help="an IANA time zone", check=TimeZone())


@attrs.frozen
class RouteConfig:
    """One notification route, ``[notify.routes.<name>]``: a notifier and its options.

    The incident keys (``kinds``, ``escalate_after``, ``quiet_hours``, ``digest``) say which
    incidents the route gets and when; fdcore applies them, the notifier never sees them.
    """

    name: str = setting(help="the route's name", header=True)
    notifier: str = setting(help='the notifier: "log", or an installed one such as "teams"')
    options: Mapping[str, Any] = setting(
        factory=dict, help="the notifier's options (never secrets)", rest=True
    )
    kinds: tuple[str, ...] = setting(
        (),
        help="incident kinds it gets; empty: every kind",
        check=OneOf(INCIDENT_KINDS, "incident kind"),
    )
    escalate_after: float | None = setting(
        None, help="open and unacknowledged this long before it posts", check=Duration()
    )
    quiet_hours: QuietHours | None = setting(None, help="posts due inside wait until its end")
    digest: float | None = setting(
        None, help="what falls due within this interval is one post", check=Duration()
    )


@attrs.frozen
class Objective:
    """One ``[[incidents.objectives]]``: what a table or a schedule must keep up.

    ``success_rate``: of the runs (a table's) or requests (a schedule's) that ended within
    ``window``, at least this share succeeded. ``freshness``: the last success is no older.
    """

    table: str | None = setting(
        None, help="the table judged (its run log)", check=AnId("table name")
    )
    schedule: str | None = setting(
        None, help="the schedule judged (its requests)", check=AnId("schedule id")
    )
    success_rate: float | None = setting(
        None, help="the share that must succeed, in (0, 1]", check=Portion()
    )
    window: float = setting(86400.0, help="the success rate's window", check=Duration())
    freshness: float | None = setting(
        None, help="the last success is at most this old", check=Duration()
    )

    def __attrs_post_init__(self) -> None:
        if (self.table is None) == (self.schedule is None):
            raise Invalid((), "needs exactly one of table, schedule")
        if self.success_rate is None and self.freshness is None:
            raise Invalid((), "needs success_rate (with window) or freshness")

    @staticmethod
    def schema_extra() -> dict[str, Any]:
        return {
            "additionalProperties": False,
            "oneOf": [{"required": ["table"]}, {"required": ["schedule"]}],
            "anyOf": [{"required": ["success_rate"]}, {"required": ["freshness"]}],
        }

    @property
    def subject(self) -> str:
        return f"table.{self.table}" if self.table is not None else f"schedule.{self.schedule}"


@attrs.frozen
class IncidentsConfig:
    """``[incidents]``: whether this agent evaluates the environment and delivers incidents."""

    enabled: bool = setting(
        False, help="evaluate the environment and post incidents (off: no new writes or posts)"
    )
    every: float = setting(60.0, help="between evaluations", check=Duration())
    lookback: float = setting(
        86400.0,
        help="an older failure or missed slot opens no incident",
        check=Duration(),
    )
    objectives: tuple[Objective, ...] = setting((), help="what tables and schedules keep up")


@attrs.frozen
class RetentionConfig:
    """``[retention]``: finished requests older than ``keep`` leave the live folders
    (docs/retention.md). On by default, archiving: nothing is deleted unless ``archive = false``.
    """

    enabled: bool = setting(True, help="move finished requests out of the live folders")
    keep: float = setting(
        7 * 86400.0,
        help="age of a finished request (since its final status) before it is moved",
        check=Duration(),
    )
    archive: bool = setting(
        True,
        help="true: move to archive/YYYY/MM/DD/; false: delete",
        expects="true (move to archive/) or false (delete)",
    )
    every: float = setting(
        3600.0,
        help="one run per interval across the environment (at least 1m)",
        check=Duration(MIN_RETENTION_EVERY),
    )
    batch: int = setting(
        100, help="requests looked at per poll during a run", check=Whole(1, MAX_RETENTION_BATCH)
    )


# -- the tables the agent reads as one flat AgentConfig -------------------------------------------


def _polls_within_stale(instance: Any, _attribute: Any, stale: float) -> None:
    poll = instance.poll_seconds
    if poll * POLLS_PER_STALE > stale:
        raise Invalid(
            ("poll_seconds",),
            f"must be at most stale_after / {POLLS_PER_STALE} ({stale / POLLS_PER_STALE:g}),"
            f" got {poll:g}: a busy agent would look lost",
        )


@attrs.frozen
class AgentTable:
    """``[agent]``: who the agent is, where its environment is, how often it polls."""

    name: str = setting(help="unique in the environment", check=AnId("agent name"))
    environment: str = setting(help="the environment's URL: any storage URL a plugin serves")
    owner: str | None = setting(
        None,
        help="who to call about it (a person or team): shown by the views and incidents",
        check=_OWNER,
    )
    compute_per_hour: float | None = setting(
        None,
        help="what the agent's machine costs, dollars an hour: prices its table runs' wall"
        " time in fdcore cost",
        check=Number(0, MAX_COMPUTE_PER_HOUR),
    )
    poll_seconds: float = setting(
        5.0,
        help="seconds between polls (at most stale_after / 3)",
        check=Seconds(MIN_POLL_SECONDS),
    )
    stale_after: float = setting(
        60.0,
        help="seconds without a heartbeat before it looks stale",
        check=[Seconds(MIN_STALE_AFTER), _polls_within_stale],
    )
    concurrency: int = setting(
        1, help="workers: requests run at once", check=Whole(1, MAX_CONCURRENCY)
    )
    shutdown_grace: float = setting(
        300.0,
        help="seconds running tables get to finish on SIGTERM",
        check=Seconds(zero_allowed=True),
    )
    host: str | None = setting(
        None,
        help="the host folder whose execution slots it shares (docs/host.md)",
        check=Text(4096),
        expects="a folder path",
    )
    host_admission: str = setting("slots", help="the host admission plugin: slots or lanes")
    max_file_bytes: int = setting(
        factory=operator_file_bound,
        shown="$FDCORE_MAX_FILE_BYTES, else 1048576",
        help="a bigger mailbox file is reported, never read",
        check=FileBound(),
    )
    create: bool = setting(False, help="create the environment if it is not there")


@attrs.frozen
class StorageTable:
    """``[storage]``: the storage backend's options (never secrets: name the variables)."""

    backend: str | None = setting(None, help="force a backend instead of choosing by URL")
    options: dict[str, str] = setting(
        factory=dict, help="the backend's options, e.g. connection_string_env", rest=True
    )


@attrs.frozen
class PipelineTable:
    """``[pipeline]``: how requests are claimed, taken over, attempted and leased."""

    claim: str = setting("when_free", help='the claim policy: "when_free" or "always"')
    take_over: bool = setting(False, help="take over requests of lost agents")
    takeover_policy: str = setting("stale_record", help="the takeover policy")
    grace_seconds: float = setting(
        GRACE.default, help="seconds past stale_after before an agent is lost", check=GRACE
    )
    max_attempts: int = setting(
        3, help="lost attempts before a request fails", check=Whole(1, MAX_ATTEMPTS)
    )
    leases: str = setting("mailbox", help="the table lease provider")
    lease_seconds: float | None = setting(
        None,
        help="a table lease's time (at least 3 x poll_seconds; default: stale_after)",
        seconds=True,
    )


@attrs.frozen
class RunnerTable:
    """``[runner]``: what runs a table."""

    kind: str = setting("command", help='the table runner: "command" or "python"')
    command: list[str] | None = setting(
        None,
        help="command: the program and its arguments, run once per table",
        check=NonEmpty(),
        expects="a non-empty list of strings",
    )
    function: str | None = setting(
        None,
        help='python: the table function, "module:attribute"',
        expects="a string 'module:attribute'",
    )
    cwd: str | None = setting(None, help="the folder it runs in")
    run_as: str | None = setting(
        None,
        help="the identity its tables run as, recorded in each run (default: user@host);"
        " the runner gets it as FDCORE_RUN_AS",
        check=_OWNER,
    )


@attrs.frozen
class NotifyTable:
    """``[notify]``: the notification routes."""

    routes: dict[str, RouteConfig] = setting(
        factory=dict,
        help="the routes, [notify.routes.<name>]",
        check=AnId("route name"),
        expects="a table of routes, [notify.routes.<name>]",
    )


def _lease_outlasts_polls(instance: AgentToml, attribute: Any, pipeline: PipelineTable) -> None:
    """A lease is renewed at half its time, at least one poll before it runs out."""
    if pipeline.lease_seconds is None:
        return
    least = Seconds(instance.agent.poll_seconds * POLLS_PER_LEASE)
    try:
        least.check(pipeline.lease_seconds)
    except ConfigError as exc:
        raise Invalid((attribute.name, "lease_seconds"), exc.message) from None


def _keep_covers_incidents(instance: AgentToml, attribute: Any, retention: RetentionConfig) -> None:
    """``keep`` must cover what incident evaluation reads back in time."""
    incidents = instance.incidents
    needed = [("[incidents] lookback", incidents.lookback)]
    for number, objective in enumerate(incidents.objectives, start=1):
        needed.append((f"[[incidents.objectives]] #{number} window", objective.window))
        if objective.freshness is not None:
            needed.append((f"[[incidents.objectives]] #{number} freshness", objective.freshness))
    for key, seconds in needed:
        if retention.keep < seconds:
            raise Invalid(
                (attribute.name, "keep"),
                f"{format_duration(retention.keep)} is shorter than {key} "
                f"({format_duration(seconds)}): incidents would judge requests retention has "
                "moved away",
            )


@attrs.frozen
class AgentToml:
    """agent.toml: one agent's settings (docs/agents.md)."""

    agent: AgentTable = setting(help="who the agent is and where")
    storage: StorageTable = setting(factory=StorageTable, help="the storage backend's options")
    pipeline: PipelineTable = setting(
        factory=PipelineTable,
        help="claims, takeovers, attempts, leases",
        check=_lease_outlasts_polls,
    )
    runner: RunnerTable = setting(factory=RunnerTable, help="what runs a table")
    schedules: tuple[ScheduleTable, ...] = setting((), help="requests created on a timetable")
    notify: NotifyTable = setting(factory=NotifyTable, help="notification routes")
    incidents: IncidentsConfig = setting(factory=IncidentsConfig, help="incidents")
    retention: RetentionConfig = setting(
        factory=RetentionConfig, help="retention", check=_keep_covers_incidents
    )

    def settings(self, source: str) -> AgentConfig:
        """The agent's settings: each AgentConfig field read from the key it names
        (:func:`_read_from`), the runner's other keys as its options, ``source`` naming the file."""
        values = {
            field.name: _at(self, field.metadata[_READ_FROM])
            for field in attrs.fields(AgentConfig)
            if _READ_FROM in field.metadata
        }
        read = {path[1] for path in read_paths() if path[0] == "runner"}
        options = {k: v for k, v in attrs.asdict(self.runner).items() if k not in read}
        return AgentConfig(
            **values,
            runner_options={k: v for k, v in options.items() if v is not None},
            schedules=tuple(_schedule(table) for table in self.schedules),
            routes=tuple(attrs.evolve(r, name=n) for n, r in self.notify.routes.items()),
            source=source,
        )


def _at(toml: AgentToml, path: tuple[str, ...]) -> Any:
    value: Any = toml
    for step in path:
        value = getattr(value, step)
    return value


def _schedule(table: ScheduleTable) -> ScheduleConfig:
    [(timing, spec)] = table.timing.items()  # exactly one: checked with the installed plugins
    options = {"timezone": table.timezone, "deadline": table.deadline}
    return ScheduleConfig(
        id=table.id,
        entities=table.entities,
        timing=timing,
        spec=spec,
        shared=table.shared,
        options={k: v for k, v in options.items() if v is not None},
        owner=table.owner,
        run_as=table.run_as,
    )


#: The metadata key of an AgentConfig field: the agent.toml path it is read from.
_READ_FROM = "fdcore.read_from"


def _read_from(table: str, key: str | None = None) -> Any:
    """An AgentConfig field read from agent.toml's ``[table] key`` (or the whole table), its
    default the declared one: the field names the key, the key holds the rest."""
    path = (table,) if key is None else (table, key)
    declared: Any = attrs.fields_dict(attrs.resolve_types(AgentToml))[table].type
    default = default_of(AgentToml, table) if key is None else default_of(declared, key)
    return attrs.field(default=default, metadata={_READ_FROM: path})


def read_paths() -> list[tuple[str, ...]]:
    """The agent.toml paths AgentConfig's fields are read from, in order."""
    return [f.metadata[_READ_FROM] for f in attrs.fields(AgentConfig) if _READ_FROM in f.metadata]


@attrs.frozen
class AgentConfig:
    """An agent's settings, flat: each field names the agent.toml key it is read from and takes
    that key's declared default (``tests/test_settings_readers.py`` holds that every key of
    ``[agent]``, ``[storage]``, ``[pipeline]`` and ``[runner]`` is read exactly once)."""

    name: str = _read_from("agent", "name")
    environment: str = _read_from("agent", "environment")
    owner: str | None = _read_from("agent", "owner")
    compute_per_hour: float | None = _read_from("agent", "compute_per_hour")
    poll_seconds: float = _read_from("agent", "poll_seconds")
    stale_after: float = _read_from("agent", "stale_after")
    concurrency: int = _read_from("agent", "concurrency")
    shutdown_grace: float = _read_from("agent", "shutdown_grace")
    storage_backend: str | None = _read_from("storage", "backend")
    storage_options: Mapping[str, str] = _read_from("storage", "options")
    claim: str = _read_from("pipeline", "claim")
    take_over: bool = _read_from("pipeline", "take_over")
    takeover_policy: str = _read_from("pipeline", "takeover_policy")
    grace_seconds: float = _read_from("pipeline", "grace_seconds")
    max_attempts: int = _read_from("pipeline", "max_attempts")
    leases: str = _read_from("pipeline", "leases")
    lease_seconds: float | None = _read_from("pipeline", "lease_seconds")  # None: stale_after
    runner: str = _read_from("runner", "kind")
    runner_options: Mapping[str, Any] = attrs.field(factory=dict)  # [runner]'s other keys
    run_as: str | None = _read_from("runner", "run_as")
    schedules: tuple[ScheduleConfig, ...] = ()
    routes: tuple[RouteConfig, ...] = ()  # notification routes, in the order of agent.toml
    incidents: IncidentsConfig = _read_from("incidents")
    retention: RetentionConfig = _read_from("retention")
    host: str | None = _read_from("agent", "host")  # the host folder (docs/host.md)
    host_admission: str = _read_from("agent", "host_admission")
    max_file_bytes: int = _read_from("agent", "max_file_bytes")
    create: bool = _read_from("agent", "create")
    source: str = "<config>"

    @property
    def lease_ttl(self) -> float:
        return self.lease_seconds if self.lease_seconds is not None else self.stale_after
