"""``agent.toml``: parsed, validated, typed. Every mistake is one line naming the file and key.

A schedule's timing keys are the names of the installed slot functions (``every``, ``cron``,
``daily``, ``weekly`` from fdcore-slots, or a plugin's own), so parsing needs the plugins.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from datetime import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fdcore.agent.settings import (
    AgentConfig,
    IncidentsConfig,
    Objective,
    QuietHours,
    RetentionConfig,
    RouteConfig,
    ScheduleConfig,
)
from fdcore.contract.codec import FILE_BYTES_RANGE, MAX_FILE_BYTES
from fdcore.contract.ids import validate_id
from fdcore.durations import (
    GRACE,
    check_duration,
    check_seconds,
    check_whole,
    format_duration,
)
from fdcore.errors import ConfigError, InvalidId
from fdcore.incidents.evaluate import KINDS as INCIDENT_KINDS
from fdcore.plugins.manager import SLOT, Plugins, load_plugins

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# section -> key -> (expected type(s), description for errors)
_NUMBER = (int, float)
_SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], str]]] = {
    "agent": {
        "name": ((str,), "a string"),
        "environment": ((str,), "a string"),
        "poll_seconds": (_NUMBER, "a number"),
        "stale_after": (_NUMBER, "a number"),
        "concurrency": ((int,), "an integer"),
        "shutdown_grace": (_NUMBER, "a number"),
        "host": ((str,), "a folder path"),
        "host_admission": ((str,), "a string"),
        "max_file_bytes": ((int,), "an integer"),
        "create": ((bool,), "true or false"),
    },
    "pipeline": {
        "claim": ((str,), "a string"),
        "take_over": ((bool,), "true or false"),
        "takeover_policy": ((str,), "a string"),
        "grace_seconds": (_NUMBER, "a number"),
        "max_attempts": ((int,), "an integer"),
        "leases": ((str,), "a string"),
        "lease_seconds": (_NUMBER, "a number"),
    },
    "runner": {
        "kind": ((str,), "a string"),
        "command": ((list,), "a list of strings"),
        "function": ((str,), "a string 'module:attribute'"),
        "cwd": ((str,), "a string"),
    },
    # and one timing key per installed slot function (see _parse_schedules)
    "schedules": {
        "id": ((str,), "a string"),
        "shared": ((bool,), "true or false"),
        "entities": ((list,), "a list of table names"),
        "timezone": ((str,), 'an IANA time zone such as "Europe/Berlin"'),
        "deadline": ((str,), 'a duration such as "6h"'),
    },
    "notify": {
        "routes": ((dict,), "a table of routes, [notify.routes.<name>]"),
    },
    "incidents": {
        "enabled": ((bool,), "true or false"),
        "every": ((str,), 'a duration such as "1m"'),
        "lookback": ((str,), 'a duration such as "1d"'),
        "objectives": ((list,), "an array of tables, [[incidents.objectives]]"),
    },
    "retention": {
        "enabled": ((bool,), "true or false"),
        "keep": ((str,), 'a duration such as "7d"'),
        "archive": ((bool,), "true (move to archive/) or false (delete)"),
        "every": ((str,), 'a duration such as "1h"'),
        "batch": ((int,), "a whole number of requests such as 100"),
    },
    "objectives": {
        "table": ((str,), "a table name"),
        "schedule": ((str,), "a schedule id"),
        "success_rate": (_NUMBER, "a number between 0 and 1"),
        "window": ((str,), 'a duration such as "1d"'),
        "freshness": ((str,), 'a duration such as "2h"'),
    },
}
# The keys of a route that fdcore applies to incidents; the others are the notifier's options.
_ROUTE_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "kinds": ((list,), "a list of incident kinds"),
    "escalate_after": ((str,), 'a duration such as "30m"'),
    "quiet_hours": ((dict,), '{start = "22:00", end = "07:00", timezone = "Europe/Berlin"}'),
    "digest": ((str,), 'a duration such as "15m"'),
}

_SCHEDULE_OPTIONS = ("timezone", "deadline")
_SECTIONS = (
    "agent",
    "storage",
    "pipeline",
    "runner",
    "schedules",
    "notify",
    "incidents",
    "retention",
)


def _unknown(source: str, where: str, key: str, known: list[str]) -> ConfigError:
    return ConfigError.unknown_key(source, f"{where}{key}", key, known)


def _check_table(
    source: str, where: str, table: Mapping[str, Any], schema: Mapping[str, Any]
) -> None:
    for key, value in table.items():
        if key not in schema:
            raise _unknown(source, where, key, list(schema))
        types, description = schema[key]
        is_bool = isinstance(value, bool)
        if not isinstance(value, types) or (is_bool and bool not in types):
            raise ConfigError(source, f"{where}{key}", f"expected {description}, got {value!r}")


MIN_POLL_SECONDS = 0.01
MIN_STALE_AFTER = 0.1
POLLS_PER_STALE = 3  # a heartbeat may be missed twice before its agent looks lost
POLLS_PER_LEASE = 3  # a lease is renewed at half its time, and at least one poll before that
#: The most attempts a request may be given ([pipeline] max_attempts, ``submit --max-attempts``).
MAX_ATTEMPTS = 1000
MAX_CONCURRENCY = 1024


def _durations(
    source: str, agent: Mapping[str, Any], pipeline: Mapping[str, Any]
) -> dict[str, Any]:
    """The durations of [agent] and [pipeline], each sane alone and together.

    They decide when an agent is judged lost: none may let another agent take over a request
    before its holder's ``stale_after`` (plus grace) has passed, nor let a lease run out between
    two polls of its holder.
    """
    poll = check_seconds(
        source, "[agent] poll_seconds", agent.get("poll_seconds", 5.0), MIN_POLL_SECONDS
    )
    stale = check_seconds(
        source, "[agent] stale_after", agent.get("stale_after", 60.0), MIN_STALE_AFTER
    )
    if poll * POLLS_PER_STALE > stale:
        raise ConfigError(
            source,
            "[agent] poll_seconds",
            f"must be at most stale_after / {POLLS_PER_STALE} ({stale / POLLS_PER_STALE:g}),"
            f" got {poll:g}: a busy agent would look lost",
        )
    grace = GRACE.bind(source, "[pipeline] grace_seconds").check(
        pipeline.get("grace_seconds", 60.0)
    )
    shutdown = check_seconds(
        source, "[agent] shutdown_grace", agent.get("shutdown_grace", 300.0), 0, zero_allowed=True
    )
    lease = pipeline.get("lease_seconds")
    if lease is not None:
        lease = check_seconds(source, "[pipeline] lease_seconds", lease, poll * POLLS_PER_LEASE)
    return {
        "poll_seconds": poll,
        "stale_after": stale,
        "grace_seconds": grace,
        "shutdown_grace": shutdown,
        "lease_seconds": lease,
    }


def _ids(source: str, key: str, values: list[Any], what: str) -> tuple[str, ...]:
    try:
        return tuple(validate_id(value, what) for value in values)
    except InvalidId as exc:
        raise ConfigError(source, key, str(exc)) from None


def parse_config(
    data: Mapping[str, Any], source: str = "<config>", plugins: Plugins | None = None
) -> AgentConfig:
    """Validate a parsed agent.toml and build the typed config.

    ``plugins`` (default: the installed ones) give the schedules' timing keys.
    """
    for section in data:
        if section not in _SECTIONS:
            raise _unknown(source, "", f"[{section}]", [f"[{known}]" for known in _SECTIONS])
    agent = data.get("agent")
    if not isinstance(agent, Mapping):
        raise ConfigError(source, "[agent]", "missing section (needs name and environment)")
    for section in ("agent", "pipeline", "runner", "notify", "incidents", "retention"):
        table = data.get(section, {})
        if not isinstance(table, Mapping):
            raise ConfigError(source, f"[{section}]", "must be a table")
        _check_table(source, f"[{section}] ", table, _SCHEMA[section])
    for key in ("name", "environment"):
        if key not in agent:
            raise ConfigError(source, f"[agent] {key}", "missing (required)")
    try:
        name = validate_id(agent["name"], "agent name")
    except InvalidId as exc:
        raise ConfigError(source, "[agent] name", str(exc)) from None

    storage = data.get("storage", {})
    if not isinstance(storage, Mapping):
        raise ConfigError(source, "[storage]", "must be a table")
    storage_options: dict[str, str] = {}
    for key, value in storage.items():
        if not isinstance(value, str):
            raise ConfigError(source, f"[storage] {key}", f"expected a string, got {value!r}")
        storage_options[key] = value
    backend = storage_options.pop("backend", None)

    pipeline = data.get("pipeline", {})
    runner = dict(data.get("runner", {}))
    kind = runner.pop("kind", "command")
    if kind == "command":
        command = runner.get("command")
        if command is not None and not (command and all(isinstance(c, str) for c in command)):
            raise ConfigError(source, "[runner] command", "expected a non-empty list of strings")

    max_file_bytes = max_file_bytes_setting(
        source, "[agent] max_file_bytes", agent.get("max_file_bytes")
    )
    concurrency = check_whole(
        source, "[agent] concurrency", agent.get("concurrency", 1), 1, MAX_CONCURRENCY
    )
    max_attempts = check_whole(
        source, "[pipeline] max_attempts", pipeline.get("max_attempts", 3), 1, MAX_ATTEMPTS
    )

    incidents = _parse_incidents(source, data.get("incidents", {}))
    return AgentConfig(
        name=name,
        environment=agent["environment"],
        concurrency=concurrency,
        storage_backend=backend,
        storage_options=storage_options,
        claim=pipeline.get("claim", "always"),
        take_over=pipeline.get("take_over", False),
        takeover_policy=pipeline.get("takeover_policy", "stale_record"),
        max_attempts=max_attempts,
        leases=pipeline.get("leases", "mailbox"),
        runner=kind,
        runner_options=runner,
        schedules=_parse_schedules(source, data.get("schedules", []), plugins),
        routes=_parse_routes(source, data.get("notify", {}).get("routes", {})),
        incidents=incidents,
        retention=_parse_retention(source, data.get("retention", {}), incidents),
        host=agent.get("host") or None,
        host_admission=agent.get("host_admission", "slots"),
        max_file_bytes=max_file_bytes,
        create=agent.get("create", False),
        source=source,
        **_durations(source, agent, pipeline),
    )


#: Sets the mailbox file size bound for the commands, and for agents whose agent.toml does not.
FILE_BOUND_VARIABLE = "FDCORE_MAX_FILE_BYTES"


def max_file_bytes_setting(source: str, key: str, value: object | None) -> int:
    """The size bound of a mailbox read: ``value`` if given, else $FDCORE_MAX_FILE_BYTES, else
    1 MiB; within FILE_BYTES_RANGE (a file over it is reported and never read)."""
    if value is None:
        text = os.environ.get(FILE_BOUND_VARIABLE)
        if text is None:
            return MAX_FILE_BYTES
        source, key = f"environment variable {FILE_BOUND_VARIABLE}", ""
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(source, None, f"expected an integer, got {text!r}") from None
    low, high = FILE_BYTES_RANGE
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(source, key or None, f"must be {low}..{high} bytes, got {value!r}")
    return value


def storage_option(text: str) -> tuple[str, str]:
    """A command line's ``--option KEY=VALUE``: one key of ``[storage]`` (argparse type)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _duration(source: str, key: str, text: str) -> float:
    return check_duration(source, key, text)


def _parse_incidents(source: str, table: Mapping[str, Any]) -> IncidentsConfig:
    every = table.get("every")
    lookback = table.get("lookback")
    return IncidentsConfig(
        enabled=table.get("enabled", False),
        every=60.0 if every is None else _duration(source, "[incidents] every", every),
        lookback=86400.0
        if lookback is None
        else _duration(source, "[incidents] lookback", lookback),
        objectives=tuple(
            _objective(source, f"[[incidents.objectives]] #{n + 1} ", objective)
            for n, objective in enumerate(table.get("objectives", []))
        ),
    )


#: The longest ``[retention] keep`` (and ``retention run --keep``): ten years (any longer,
#: turn retention off); with its words, for the error.
MAX_KEEP_SECONDS = 10 * 365 * 86400.0
KEEP_RANGE = (MAX_KEEP_SECONDS, "10 years")
MIN_RETENTION_EVERY = 60.0
MAX_RETENTION_BATCH = 10_000


def _parse_retention(
    source: str, table: Mapping[str, Any], incidents: IncidentsConfig
) -> RetentionConfig:
    """``[retention]``; ``keep`` must cover what incident evaluation reads back in time."""
    default = RetentionConfig()
    keep = default.keep
    if "keep" in table:
        keep = check_duration(source, "[retention] keep", table["keep"], *KEEP_RANGE)
    needed = [("[incidents] lookback", incidents.lookback)]
    for number, objective in enumerate(incidents.objectives, start=1):
        needed.append((f"[[incidents.objectives]] #{number} window", objective.window))
        if objective.freshness is not None:
            needed.append((f"[[incidents.objectives]] #{number} freshness", objective.freshness))
    for key, seconds in needed:
        if keep < seconds:
            raise ConfigError(
                source,
                "[retention] keep",
                f"{format_duration(keep)} is shorter than {key} ({format_duration(seconds)}): "
                "incidents would judge requests retention has moved away",
            )
    every = default.every
    if "every" in table:
        every = _duration(source, "[retention] every", table["every"])
        if every < MIN_RETENTION_EVERY:
            raise ConfigError(
                source, "[retention] every", f"must be at least 1m, got {format_duration(every)}"
            )
    batch = check_whole(
        source, "[retention] batch", table.get("batch", default.batch), 1, MAX_RETENTION_BATCH
    )
    return RetentionConfig(
        enabled=table.get("enabled", default.enabled),
        keep=keep,
        archive=table.get("archive", default.archive),
        every=every,
        batch=batch,
    )


def _objective(source: str, where: str, table: object) -> Objective:
    if not isinstance(table, Mapping):
        raise ConfigError(source, where.strip(), "must be a table")
    _check_table(source, where, table, _SCHEMA["objectives"])
    if ("table" in table) == ("schedule" in table):
        raise ConfigError(source, where.strip(), "needs exactly one of table, schedule")
    what = "table name" if "table" in table else "schedule id"
    name = _ids(
        source,
        f"{where}{'table' if 'table' in table else 'schedule'}",
        [table.get("table", table.get("schedule"))],
        what,
    )[0]
    if "success_rate" not in table and "freshness" not in table:
        raise ConfigError(source, where.strip(), "needs success_rate (with window) or freshness")
    rate = table.get("success_rate")
    if rate is not None and not 0 < rate <= 1:
        raise ConfigError(source, f"{where}success_rate", f"must be in (0, 1], got {rate!r}")
    window = table.get("window")
    freshness = table.get("freshness")
    return Objective(
        table=name if "table" in table else None,
        schedule=name if "schedule" in table else None,
        success_rate=None if rate is None else float(rate),
        window=86400.0 if window is None else _duration(source, f"{where}window", window),
        freshness=None if freshness is None else _duration(source, f"{where}freshness", freshness),
    )


def _clock_time(source: str, key: str, value: object) -> time:
    if not isinstance(value, str):
        raise ConfigError(source, key, f'expected a time such as "22:00", got {value!r}')
    try:
        return time.fromisoformat(value)
    except ValueError:
        raise ConfigError(source, key, f'expected a time such as "22:00", got {value!r}') from None


def _quiet_hours(source: str, where: str, table: Mapping[str, Any]) -> QuietHours:
    for key in table:
        if key not in ("start", "end", "timezone"):
            raise _unknown(source, f"{where} quiet_hours.", key, ["start", "end", "timezone"])
    for key in ("start", "end"):
        if key not in table:
            raise ConfigError(source, f"{where} quiet_hours.{key}", "missing (required)")
    zone = table.get("timezone", "UTC")
    try:
        ZoneInfo(zone)
    except (ValueError, TypeError, ZoneInfoNotFoundError):
        raise ConfigError(
            source, f"{where} quiet_hours.timezone", f"unknown IANA time zone {zone!r}"
        ) from None
    return QuietHours(
        _clock_time(source, f"{where} quiet_hours.start", table["start"]),
        _clock_time(source, f"{where} quiet_hours.end", table["end"]),
        zone,
    )


def _route(source: str, where: str, name: str, notifier: str, keys: dict[str, Any]) -> RouteConfig:
    """The route with its incident keys taken out of the notifier's options and checked."""
    _check_table(
        source, f"{where} ", {k: v for k, v in keys.items() if k in _ROUTE_KEYS}, _ROUTE_KEYS
    )
    kinds = tuple(keys.pop("kinds", ()))
    for kind in kinds:
        if kind not in INCIDENT_KINDS:  # fdcore.incidents.evaluate.KINDS
            raise ConfigError(
                source,
                f"{where} kinds",
                f"unknown incident kind {kind!r} (known: {', '.join(INCIDENT_KINDS)})",
            )
    escalate_after = keys.pop("escalate_after", None)
    quiet = keys.pop("quiet_hours", None)
    digest = keys.pop("digest", None)
    return RouteConfig(
        name,
        notifier,
        keys,
        kinds=kinds,
        escalate_after=(
            None
            if escalate_after is None
            else _duration(source, f"{where} escalate_after", escalate_after)
        ),
        quiet_hours=None if quiet is None else _quiet_hours(source, where, quiet),
        digest=None if digest is None else _duration(source, f"{where} digest", digest),
    )


def _parse_schedules(
    source: str, schedules: object, plugins: Plugins | None
) -> tuple[ScheduleConfig, ...]:
    if not isinstance(schedules, list):
        raise ConfigError(source, "[[schedules]]", "must be an array of tables")
    if not schedules:
        return ()
    plugins = plugins or load_plugins()
    timings = list(plugins.implementations(SLOT))
    schema = {**_SCHEMA["schedules"], **{timing: ((str,), "a string") for timing in timings}}
    parsed: list[ScheduleConfig] = []
    seen: set[str] = set()
    for index, table in enumerate(schedules):
        where = f"[[schedules]] #{index + 1} "
        if not isinstance(table, Mapping):
            raise ConfigError(source, where.strip(), "must be a table")
        for key in table:
            if key not in schema and key in SLOT.ours:  # one of ours, not installed: say which
                plugins.get(SLOT, key)
        _check_table(source, where, table, schema)
        if "id" not in table:
            raise ConfigError(source, f"{where}id", "missing (required)")
        try:
            schedule_id = validate_id(table["id"], "schedule id")
        except InvalidId as exc:
            raise ConfigError(source, f"{where}id", str(exc)) from None
        if schedule_id in seen:
            raise ConfigError(source, f"{where}id", f"schedule {schedule_id!r} appears twice")
        seen.add(schedule_id)
        given = [key for key in timings if key in table]
        if len(given) != 1:
            known = ", ".join(timings) or "the slot functions' keys (none is installed)"
            raise ConfigError(source, f"{where}({schedule_id})", f"needs exactly one of {known}")
        options = {key: table[key] for key in _SCHEDULE_OPTIONS if key in table}
        parsed.append(
            ScheduleConfig(
                id=schedule_id,
                entities=_ids(source, f"{where}entities", table.get("entities", []), "table name"),
                timing=given[0],
                spec=table[given[0]],
                shared=table.get("shared", False),
                options=options,
            )
        )
    return tuple(parsed)


def _parse_routes(source: str, routes: Mapping[str, Any]) -> tuple[RouteConfig, ...]:
    """``[notify.routes.<name>]`` tables: ``notifier`` names the notifier, other keys are its
    options (checked by the notifier when the route is opened at start-up)."""
    parsed = []
    for name, table in routes.items():
        where = f"[notify.routes.{name}]"
        try:
            validate_id(name, "route name")
        except InvalidId as exc:
            raise ConfigError(source, where, str(exc)) from None
        if not isinstance(table, Mapping):
            raise ConfigError(source, where, "must be a table")
        options = dict(table)
        notifier = options.pop("notifier", None)
        if notifier is None:
            raise ConfigError(source, f"{where} notifier", 'missing (required, e.g. "log")')
        if not isinstance(notifier, str):
            raise ConfigError(source, f"{where} notifier", f"expected a string, got {notifier!r}")
        parsed.append(_route(source, where, name, notifier, options))
    return tuple(parsed)


def load_config(path: str | Path, plugins: Plugins | None = None) -> AgentConfig:
    """Read and validate ``path``; a missing file or bad TOML is a one-line ConfigError too.

    ``plugins`` (default: the installed ones) give the schedules' timing keys.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, None, f"not valid TOML: {exc}") from None
    return parse_config(data, source, plugins)
