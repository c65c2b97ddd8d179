"""What an agent is told: its settings and schedules, typed (``agent.toml`` parsed, validated).

Parsing and validating the TOML file is the command line's job (:mod:`fdcore.cli.config`); the
agent and the simulator only ever see these values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


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
class RouteConfig:
    """One notification route, ``[notify.routes.<name>]``: a notifier and its options."""

    name: str
    notifier: str
    options: Mapping[str, Any] = attrs.field(factory=dict)  # the route's other keys


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
    host: str | None = None  # the host folder its tables are admitted through (docs/host.md)
    host_admission: str = "slots"  # the host admission plugin that opens it
    source: str = "<config>"

    @property
    def lease_ttl(self) -> float:
        return self.lease_seconds if self.lease_seconds is not None else self.stale_after
