"""What an agent is told: its settings and schedules, typed (``agent.toml`` parsed, validated).

Parsing and validating the TOML file is the command line's job (:mod:`fdcore.cli.config`); the
agent and the simulator only ever see these values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import time
from typing import Any

import attrs

from fdcore.contract.codec import MAX_FILE_BYTES


@attrs.frozen
class ScheduleConfig:
    """One ``[[schedules]]`` table."""

    id: str
    entities: tuple[str, ...]
    timing: str  # the slot function's name (every, cron, daily, weekly or a plugin's)
    spec: str  # its value, e.g. "1h"
    shared: bool = False
    options: Mapping[str, Any] = attrs.field(factory=dict)  # timezone, deadline


@attrs.frozen
class QuietHours:
    """``quiet_hours = {start = "22:00", end = "07:00", timezone = "Europe/Berlin"}``: posts due
    inside are deferred to ``end`` (a span past midnight wraps)."""

    start: time
    end: time
    timezone: str = "UTC"


@attrs.frozen
class RouteConfig:
    """One notification route, ``[notify.routes.<name>]``: a notifier and its options.

    The incident keys (``kinds``, ``escalate_after``, ``quiet_hours``, ``digest``) say which
    incidents the route gets and when; fdcore applies them, the notifier never sees them.
    """

    name: str
    notifier: str
    options: Mapping[str, Any] = attrs.field(factory=dict)  # the notifier's keys
    kinds: tuple[str, ...] = ()  # incident kinds it gets; empty: every kind
    escalate_after: float | None = None  # seconds open and unacknowledged before it posts
    quiet_hours: QuietHours | None = None
    digest: float | None = None  # seconds: what falls due within one interval is one post


@attrs.frozen
class Objective:
    """One ``[[incidents.objectives]]``: what a table or a schedule must keep up.

    ``success_rate``: of the runs (a table's) or requests (a schedule's) that ended within
    ``window``, at least this share succeeded. ``freshness``: the last success is no older.
    """

    table: str | None = None
    schedule: str | None = None
    success_rate: float | None = None
    window: float = 86400.0
    freshness: float | None = None

    @property
    def subject(self) -> str:
        return f"table.{self.table}" if self.table is not None else f"schedule.{self.schedule}"


@attrs.frozen
class IncidentsConfig:
    """``[incidents]``: whether this agent evaluates the environment and delivers incidents."""

    enabled: bool = False  # off: an upgraded agent starts no new writes or posts by itself
    every: float = 60.0  # seconds between evaluations
    lookback: float = 86400.0  # older failures and missed slots open no incident
    objectives: tuple[Objective, ...] = ()


@attrs.frozen
class RetentionConfig:
    """``[retention]``: finished requests older than ``keep`` leave the live folders
    (docs/retention.md). On by default, archiving: nothing is deleted unless ``archive = false``.
    """

    enabled: bool = True
    keep: float = 7 * 86400.0  # seconds since a request's status became final
    archive: bool = True  # move to archive/YYYY/MM/DD/ (False: delete)
    every: float = 3600.0  # seconds between runs, across the environment (the retention lease)
    batch: int = 100  # requests looked at per poll while a run is under way


@attrs.frozen
class AgentConfig:
    name: str
    environment: str
    poll_seconds: float = 5.0
    stale_after: float = 60.0
    concurrency: int = 1
    shutdown_grace: float = 300.0
    storage_backend: str | None = None
    storage_options: Mapping[str, str] = attrs.field(factory=dict)
    claim: str = "always"
    take_over: bool = False
    takeover_policy: str = "stale_record"
    grace_seconds: float = 60.0
    max_attempts: int = 3
    leases: str = "mailbox"
    lease_seconds: float | None = None  # default: stale_after
    runner: str = "command"
    runner_options: Mapping[str, Any] = attrs.field(factory=dict)
    schedules: tuple[ScheduleConfig, ...] = ()
    routes: tuple[RouteConfig, ...] = ()  # notification routes, in the order of agent.toml
    incidents: IncidentsConfig = IncidentsConfig()
    retention: RetentionConfig = RetentionConfig()
    host: str | None = None  # the host folder its tables are admitted through (docs/host.md)
    host_admission: str = "slots"  # the host admission plugin that opens it
    max_file_bytes: int = MAX_FILE_BYTES  # a bigger mailbox file is reported, never read
    create: bool = False  # create the environment if it is not there (else: one-line error)
    source: str = "<config>"

    @property
    def lease_ttl(self) -> float:
        return self.lease_seconds if self.lease_seconds is not None else self.stale_after
