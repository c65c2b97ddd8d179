"""Operator commands: ``agent run``, ``submit``, ``queue``, ``agents``."""

from __future__ import annotations

import argparse
import json
import secrets
from datetime import datetime, timezone
from typing import Any

from fdcore.codec import parse_time
from fdcore.config import load_config
from fdcore.errors import ConfigError, InvalidId
from fdcore.ids import validate_id
from fdcore.mailbox import Mailbox, request_key
from fdcore.models import Request
from fdcore.plugins import TAKEOVER, load_plugins
from fdcore.runtime import AgentRuntime
from fdcore.storage import AlreadyExists
from fdcore.views import agent_rows, describe_attempts, queue_rows


def _mailbox(url: str) -> Mailbox:
    return Mailbox(load_plugins().open_storage(url))


def _agent_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    runtime = AgentRuntime(config)
    runtime.install_signal_handlers()
    return runtime.run()


def new_request_id(now: datetime) -> str:
    return f"req-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def submit(
    mailbox: Mailbox,
    entities: list[str],
    *,
    request_id: str | None = None,
    max_attempts: int | None = None,
    deadline: datetime | None = None,
    now: datetime | None = None,
    created_by: str | None = None,
) -> Request:
    """Write a new request into the mailbox (create-if-absent); return it."""
    now = now or datetime.now(timezone.utc)
    request = Request(
        id=request_id or new_request_id(now),
        entities=entities,
        created_at=now,
        created_by=created_by,
        deadline=deadline,
        max_attempts=max_attempts,
    )
    mailbox.create(request_key(request.id), request)
    return request


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
    deadline = None
    if args.deadline:
        try:
            deadline = parse_time(args.deadline)
        except ValueError as exc:
            raise ConfigError(
                "fdcore submit", "--deadline", f"not an ISO 8601 time: {exc}"
            ) from None
    if args.max_attempts is not None and args.max_attempts < 1:
        raise ConfigError("fdcore submit", "--max-attempts", "must be >= 1")
    try:
        request = submit(
            _mailbox(args.env),
            entities,
            request_id=args.id,
            max_attempts=args.max_attempts,
            deadline=deadline,
            created_by="fdcore submit",
        )
    except AlreadyExists:
        raise ConfigError("fdcore submit", "--id", f"request {args.id!r} already exists") from None
    print(request.id)
    return 0


def _time(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value else "-"


def _queue(args: argparse.Namespace) -> int:
    from fdcore.cli import format_table

    mailbox = _mailbox(args.env)
    rows = queue_rows(mailbox, include_final=not args.active)
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return 0
    agents = {row.name: row.state for row in _agent_rows(mailbox, args.grace)}
    table = [("REQUEST", "STATE", "ATTEMPTS", "SCHEDULE", "CREATED", "DEADLINE")]
    for row in rows:
        schedule = f"{row.schedule}@{row.slot}" if row.schedule else "-"
        attempts = describe_attempts(row, agents) or "-"
        table.append(
            (row.id, row.state, attempts, schedule, _time(row.created_at), _time(row.deadline))
        )
    print(format_table(table))
    return 0


def _agent_rows(mailbox: Mailbox, grace: float) -> list[Any]:
    policy = load_plugins().get(TAKEOVER, "stale_record")
    return agent_rows(mailbox, datetime.now(timezone.utc), policy, grace)


def _agents(args: argparse.Namespace) -> int:
    from fdcore.cli import format_table

    rows = _agent_rows(_mailbox(args.env), args.grace)
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return 0
    table = [("AGENT", "STATE", "VERSION", "LAST SEEN", "RUNNING", "CLAIM", "TAKE OVER")]
    for row in rows:
        table.append(
            (
                row.name,
                row.state,
                row.version or "-",
                _time(row.last_seen),
                f"{row.running}/{row.concurrency}",
                row.claim or "-",
                "yes" if row.take_over else "no",
            )
        )
    print(format_table(table))
    return 0


def register(commands: Any) -> None:
    agent = commands.add_parser("agent", help="run an agent")
    agent_commands = agent.add_subparsers(dest="agent_command", required=True, metavar="COMMAND")
    run = agent_commands.add_parser("run", help="run an agent until SIGTERM or SIGINT")
    run.add_argument("--config", required=True, help="path to agent.toml")
    run.set_defaults(run=_agent_run)

    submit_parser = commands.add_parser("submit", help="queue a request")
    submit_parser.add_argument("--env", required=True, help="environment URL")
    submit_parser.add_argument("--entities", required=True, help="tables, comma-separated")
    submit_parser.add_argument("--id", help="request id (default: generated)")
    submit_parser.add_argument("--max-attempts", type=int, help="attempts before it fails")
    submit_parser.add_argument("--deadline", help="ISO 8601 time after which it expires")
    submit_parser.set_defaults(run=_submit)

    for name, handler, text in (
        ("queue", _queue, "list requests with state, attempts and agents"),
        ("agents", _agents, "list agents: live, stale, lost or stopped"),
    ):
        parser = commands.add_parser(name, help=text)
        parser.add_argument("--env", required=True, help="environment URL")
        parser.add_argument("--json", action="store_true", help="stable machine-readable output")
        parser.add_argument(
            "--grace", type=float, default=60.0, help="seconds past stale_after before lost"
        )
        if name == "queue":
            parser.add_argument("--active", action="store_true", help="hide finished requests")
        parser.set_defaults(run=handler)
