"""Operator commands: ``agent run``, ``submit``, ``queue [--watch]``, ``agents``, ``schedules``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from fdcore.abc import Command
from fdcore.cli.config import (
    add_environment_flags,
    load_config,
    naming_the_file,
    storage_option,
)
from fdcore.cli.output import format_table
from fdcore.cli.runtime import AgentRuntime
from fdcore.cli.wait import add_submit_flags, after_submit, check_submit_flags
from fdcore.clock import SystemClock
from fdcore.contract.codec import parse_time
from fdcore.contract.ids import validate_id
from fdcore.durations import parse_duration
from fdcore.environment import (
    AgentRow,
    Environment,
    describe_attempts,
    schedule_rows,
    schedule_warnings,
    shared_by,
    unfinished,
    with_host_folder,
)
from fdcore.environment.named import resolve
from fdcore.errors import (
    AlreadyExists,
    ConfigError,
    DurationError,
    EnvironmentNotFound,
    InvalidId,
)
from fdcore.mailbox.submit import deadline_from
from fdcore.plugins.manager import load_plugins
from fdcore.settings.agent_toml import PipelineTable
from fdcore.settings.checks import GRACE, Seconds, Whole, add_flag, check_duration
from fdcore.settings.declare import check_of
from fdcore.terminal import LiveView

#: Runs the agent's clock this many seconds off the machine's: fault tests of clock skew.
SKEW_VARIABLE = "FDCORE_TEST_CLOCK_SKEW"


def _test_clock() -> SystemClock:
    text = os.environ.get(SKEW_VARIABLE, "0")
    try:
        skew = float(text)
    except ValueError:
        skew = math.nan
    if not math.isfinite(skew) or abs(skew) > 86400:
        raise ConfigError(SKEW_VARIABLE, None, f"expected seconds within a day, got {text!r}")
    return SystemClock(skew)


MIN_WATCH_SECONDS = 0.01
MAX_FRAMES = 1_000_000


def _agent_run(args: argparse.Namespace) -> int:
    with naming_the_file(args.config):
        config = load_config(args.config)
        runtime = AgentRuntime(config, clock=_test_clock())
    runtime.install_signal_handlers()
    return runtime.run()


def _deadline(text: str) -> datetime | timedelta:
    """``--deadline``: a duration from now (``10m``) or an ISO 8601 time, in the future."""
    now = datetime.now(timezone.utc)
    try:
        parse_duration(text)
    except DurationError:
        try:
            at: datetime | timedelta = parse_time(text)
        except ValueError as exc:
            raise ConfigError(
                "fdcore submit",
                "--deadline",
                f"neither a duration from now (10m, 2h) nor an ISO 8601 time: {exc}",
            ) from None
    else:
        at = timedelta(seconds=check_duration("fdcore submit", "--deadline", text))
    try:
        deadline_from(at, now)  # in the future; a duration stays one (the same on a resubmit)
    except ValueError as exc:
        raise ConfigError("fdcore submit", "--deadline", str(exc)) from None
    return at


def _submit(args: argparse.Namespace) -> int:
    try:
        entities = [validate_id(e.strip(), "table name") for e in args.entities.split(",")]
    except InvalidId as exc:
        raise ConfigError("fdcore submit", "--entities", str(exc)) from None
    try:
        if args.id is not None:
            validate_id(args.id, "request id")
    except InvalidId as exc:
        raise ConfigError("fdcore submit", "--id", str(exc)) from None
    deadline = _deadline(args.deadline) if args.deadline else None
    try:
        # Only an existing environment: a mistyped URL must not start a new one.
        with Environment.open(args.env, via="cli") as environment:
            handle = environment.submit(
                entities,
                id=args.id,
                max_attempts=args.max_attempts,
                deadline=deadline,
                created_by="fdcore submit",
            )
    except AlreadyExists as exc:
        where = " (archived)" if exc.key and exc.key.startswith("archive/") else ""
        raise ConfigError(
            "fdcore submit", "--id", f"request {args.id!r} already exists{where}"
        ) from None
    assert handle.request is not None  # a handle submit returns carries its request
    return after_submit(args, handle.request)


def _init(args: argparse.Namespace) -> int:
    """Create an environment (idempotent): the one command besides an agent with
    ``[agent] create = true`` that makes one. Opening with ``create`` proves the store usable
    (on a cloud store: credentials, bucket, the rights to list, write and delete) before it
    marks the environment, so it says ``created`` or ``already an environment`` only when true."""
    plugins = load_plugins()
    target = resolve(_init_url(args))  # a URL, a named environment or an agent.toml
    url, options, backend = target.url, {**target.options, **dict(args.option)}, target.backend
    try:
        plugins.open_storage(url, options, backend, create=False, setting="fdcore init URL").close()
        existed = True
    except EnvironmentNotFound:
        existed = False
    plugins.open_storage(url, options, backend, create=True).close()
    print(f"{url}: {'already an environment' if existed else 'created'}")
    return 0


def _init_url(args: argparse.Namespace) -> str:
    """``fdcore init URL`` or ``fdcore init --env URL``, as every other command takes it."""
    if args.url and args.env and args.url != args.env:
        raise ConfigError("fdcore init", "--env", f"{args.env!r} differs from URL {args.url!r}")
    url: str | None = args.url or args.env
    if not url:
        raise ConfigError("fdcore init", "--env", "missing: name the environment to create")
    return url


def _time(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value else "-"


def _agent_rows(environment: Environment, grace: float) -> tuple[list[AgentRow], list[str]]:
    """The agents' rows, and a warning when no takeover policy can tell a lost agent: these
    commands only read, so they run without one (fdcore-takeover), showing such agents stale."""
    rows = environment.agents(grace=grace)
    why_none = environment.lost_agents_unknown  # known once the records were judged
    return rows, [why_none] if why_none else []


def _print(
    args: argparse.Namespace, key: str, rows: list[Any], table: list[Any], warnings: list[str]
) -> None:
    """The one output path of the listing commands: a JSON object, or a table and warnings."""
    if args.json:
        document = {key: [row.to_json() for row in rows], "warnings": warnings}
        print(json.dumps(document, indent=2))
        return
    print(format_table(table))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _queue_listing(
    args: argparse.Namespace, environment: Environment
) -> tuple[list[Any], list[Any], list[str]]:
    """The queue's rows (oldest first), its human table and its warnings, read once."""
    newest_first = environment.queue(include_archived=args.all).rows
    rows = [row for row in reversed(newest_first) if not args.active or unfinished(row)]
    agents, lost_unknown = _agent_rows(environment, args.grace)
    states = {row.name: row.state for row in agents}
    sharing = shared_by(agents)
    header = ("REQUEST", "STATE", "ATTEMPTS", "SCHEDULE", "CREATED", "DEADLINE")
    table: list[tuple[str, ...]] = [header + (("ARCHIVED",) if args.all else ())]
    for row in rows:
        schedule = "-"
        if row.schedule:
            schedule = f"{row.schedule} slot {row.slot}"
            if row.schedule in sharing:
                schedule += f" (Shared by {', '.join(sharing[row.schedule])})"
        attempts = describe_attempts(row, states) or "-"
        state = f"{row.state} (cancelling)" if row.cancelled_by else row.state
        cells = (row.id, state, attempts, schedule, _time(row.created_at), _time(row.deadline))
        table.append(cells + ((row.archived or "-",) if args.all else ()))
    # Why each unreadable request is stuck (also its "message" in --json).
    unreadable = [
        f"Unreadable: {row.message or row.id}" for row in rows if row.state == "unreadable"
    ]
    # A malformed cancel is none: the request runs (also its "cancel_problem" in --json).
    no_cancel = [f"Not a cancel: {row.cancel_problem}" for row in rows if row.cancel_problem]
    return rows, table, [*lost_unknown, *schedule_warnings(agents), *unreadable, *no_cancel]


def _queue(args: argparse.Namespace) -> int:
    if args.active and args.all:
        raise ConfigError("fdcore queue", "--all", "cannot be given with --active")
    # one environment for every frame of --watch: its queue reads what never changes once
    with Environment.open(args.env) as environment:
        if args.watch is not None:
            return _watch_queue(args, environment)
        rows, table, warnings = _queue_listing(args, environment)
    _print(args, "requests", rows, table, warnings)
    return 0


def _watch_queue(args: argparse.Namespace, environment: Environment) -> int:
    """``queue --watch``: the queue redrawn in place every interval until Ctrl-C (or
    ``--count`` frames); with ``--json``, one JSON document per line per frame."""
    view = LiveView()
    frames = 0
    try:
        while True:
            rows, table, warnings = _queue_listing(args, environment)
            if args.json:
                document = {"requests": [row.to_json() for row in rows], "warnings": warnings}
                print(json.dumps(document), flush=True)
            else:
                heading = f"{_time(datetime.now(timezone.utc))} UTC, every {args.watch:g}s"
                lines = [heading, format_table(table), *(f"warning: {w}" for w in warnings)]
                view.show("\n".join(lines))
            frames += 1
            if args.count is not None and frames >= args.count:
                return 0
            time.sleep(args.watch)
    except KeyboardInterrupt:  # the way to stop watching: not an error
        return 0


def _host_slots(args: argparse.Namespace, rows: list[AgentRow]) -> list[AgentRow]:
    """With ``--host``: the rows of this machine's agents carry the host folder's slots."""
    return with_host_folder(rows, args.host, args.host_admission) if args.host else rows


def _agents(args: argparse.Namespace) -> int:
    with Environment.open(args.env) as environment:
        found, lost_unknown = _agent_rows(environment, args.grace)
    rows = _host_slots(args, found)
    table = [
        (
            "AGENT",
            "STATE",
            "OWNER",
            "VERSION",
            "LAST SEEN",
            "CLOCK SKEW",
            "RUNNING",
            "HOST SLOTS",
            "CLAIM",
            "TAKE OVER",
            "SCHEDULES",
        )
    ]
    for row in rows:
        schedules = ", ".join(
            f"{info.id} (shared)" if info.shared else info.id
            for info in (row.record.schedules if row.record else [])
        )
        table.append(
            (
                row.name,
                row.state,
                row.owner or "-",
                row.version or "-",
                _time(row.last_seen),
                "-" if row.clock_skew is None else f"{row.clock_skew:+.1f}s",
                f"{row.running}/{row.concurrency}",
                "-" if row.configured_slots is None else f"{row.busy_slots}/{row.configured_slots}",
                row.claim or "-",
                "yes" if row.take_over else "no",
                schedules or "-",
            )
        )
    _print(args, "agents", rows, table, [*lost_unknown, *schedule_warnings(rows)])
    return 0


def _schedules(args: argparse.Namespace) -> int:
    with Environment.open(args.env) as environment:
        agents, lost_unknown = _agent_rows(environment, args.grace)
    rows = schedule_rows(agents)  # what environment.schedules() is, with the agents kept
    table = [("SCHEDULE", "SHARED", "WHEN", "TABLES", "NEXT DUE", "SERVED BY", "OWNER")]
    for row in rows:
        table.append(
            (
                row.id,
                "yes" if row.shared else "no",
                row.when,
                row.tables,
                _time(row.next_due),
                ", ".join(row.agents),
                row.owner or "-",
            )
        )
    _print(args, "schedules", rows, table, [*lost_unknown, *schedule_warnings(agents)])
    return 0


class AgentCommand:
    name = "agent"
    help = "run an agent"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        commands = parser.add_subparsers(dest="agent_command", required=True, metavar="COMMAND")
        run = commands.add_parser("run", help="run an agent until SIGTERM or SIGINT")
        run.add_argument("--config", required=True, help="path to agent.toml")

    def run(self, args: argparse.Namespace) -> int:
        return _agent_run(args)  # ``run``, its one subcommand


class Init:
    name = "init"
    help = "create an environment (if not there yet), after proving the store usable"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("url", nargs="?", metavar="URL", help="environment URL")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--env", help="environment URL or name (the same as URL)")
        where.add_argument(
            "--config", dest="env", metavar="AGENT_TOML", help="the environment of agent.toml"
        )
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            type=storage_option,
            help="a [storage] KEY=VALUE",
        )

    def run(self, args: argparse.Namespace) -> int:
        return _init(args)


class Submit:
    name = "submit"
    help = "queue a request"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_environment_flags(parser)
        parser.add_argument("--entities", required=True, help="tables, comma-separated")
        parser.add_argument("--id", help="request id (default: generated)")
        attempts = check_of(PipelineTable, "max_attempts")
        add_flag(parser, "--max-attempts", attempts, help="attempts before it fails")
        parser.add_argument(
            "--deadline", help="when it expires unclaimed: a duration from now (10m) or a time"
        )
        add_submit_flags(parser)

    def run(self, args: argparse.Namespace) -> int:
        check_submit_flags(args)
        return _submit(args)


def _listing_arguments(parser: argparse.ArgumentParser) -> None:
    """What ``queue``, ``agents`` and ``schedules`` share: an environment, --json, --grace."""
    add_environment_flags(parser)
    parser.add_argument("--json", action="store_true", help="stable machine-readable output")
    add_flag(parser, "--grace", GRACE, help="seconds past stale_after before lost")


class Queue:
    name = "queue"
    help = "list requests with state, attempts and agents"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _listing_arguments(parser)
        parser.add_argument("--active", action="store_true", help="hide finished requests")
        add_flag(
            parser,
            "--watch",
            Seconds(MIN_WATCH_SECONDS),
            nargs="?",
            const=2.0,
            metavar="SECONDS",
            help="redraw in place every SECONDS (default 2) until Ctrl-C",
        )
        add_flag(parser, "--count", Whole(1, MAX_FRAMES), help="with --watch: stop after N redraws")
        parser.add_argument(
            "--all", action="store_true", help="archived requests too (docs/retention.md)"
        )

    def run(self, args: argparse.Namespace) -> int:
        return _queue(args)


class Agents:
    name = "agents"
    help = "list agents: live, stale, lost or stopped"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _listing_arguments(parser)
        parser.add_argument(
            "--host", help="a host folder: show its busy/configured slots (docs/host.md)"
        )
        parser.add_argument(
            "--host-admission", default="slots", help="the host admission (default: slots)"
        )

    def run(self, args: argparse.Namespace) -> int:
        return _agents(args)


class Schedules:
    name = "schedules"
    help = "list schedules, when they are next due and who serves them"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _listing_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return _schedules(args)


#: This module's commands, in the order ``fdcore --help`` lists them.
COMMANDS: tuple[Command, ...] = (AgentCommand(), Init(), Submit(), Queue(), Agents(), Schedules())
