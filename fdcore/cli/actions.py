"""The operator's actions on one request: ``cancel``, ``retry`` and ``show`` (docs/operations.md).

``cancel`` and ``retry`` write new files only (``cancels/``, ``retries/``, a new request):
requests never change and history is never rewritten. ``show`` prints
:meth:`fdcore.Environment.request`, the view the monitor page shows too. Each is one call of
:class:`fdcore.Environment`.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from fdcore.abc import Command
from fdcore.cli.config import add_environment_flags
from fdcore.cli.output import format_table
from fdcore.contract.codec import format_time
from fdcore.contract.ids import validate_id
from fdcore.environment import FINAL_STATES, Environment, RequestStory, RunStory
from fdcore.errors import ConfigError, InvalidId


def _request_id(command: str, text: str) -> str:
    try:
        return validate_id(text, "request id")
    except InvalidId as exc:
        raise ConfigError(f"fdcore {command}", "REQUEST", str(exc)) from None


def _cancel(args: argparse.Namespace) -> int:
    request_id = _request_id("cancel", args.request)
    with Environment.open(args.env, via="cli") as environment:
        done = environment.cancel(request_id, by=args.by, reason=args.reason)
    holder = done.status.agent if done.status else None
    if args.json:
        document = {
            "request": request_id,
            "created": done.created,
            "by": done.cancel.by,
            "at": format_time(done.cancel.at),
            "reason": done.cancel.reason,
            "state": done.state,
            "agent": holder,
        }
        print(json.dumps(document, indent=2))
        return 0
    if not done.created:
        print(f"{request_id}: already cancelled by {done.cancel.by} at {_time(done.cancel.at)}")
    if done.state == "cancelled":
        print(f"{request_id}: cancelled")
    else:
        print(f"{request_id}: cancel recorded; its holder {holder} stops it at its next poll")
    return 0


def _retry(args: argparse.Namespace) -> int:
    request_id = _request_id("retry", args.request)
    if args.from_table is not None:
        try:
            validate_id(args.from_table, "table name")
        except InvalidId as exc:
            raise ConfigError("fdcore retry", "--from-table", str(exc)) from None
    with Environment.open(args.env, via="cli") as environment:
        retry = environment.retry(request_id, from_table=args.from_table, by=args.by)
    if args.json:
        tables = retry.request.entities if retry.request else []
        document = {"request": retry.id, "retry_of": request_id, "tables": tables}
        print(json.dumps(document, indent=2))
    else:
        print(retry.id)
    return 0


def _show(args: argparse.Namespace) -> int:
    request_id = _request_id("show", args.request)
    with Environment.open(args.env) as environment:
        story = environment.request(request_id)
    if args.json:
        print(json.dumps(story.to_json(), indent=2))
    else:
        print(format_story(story))
    return 0


def _time(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value else "-"


def format_story(story: RequestStory) -> str:
    """The human form of ``fdcore show``: the request, its attempts, its runs, how it ended."""
    return "\n".join([*_story_head(story), *_attempt_lines(story), *_run_lines(story)])


def _story_head(story: RequestStory) -> list[str]:
    """The request's own lines: what it asks, where it stands, and each fact it has."""
    request = story.request
    holding = "by" if story.state in FINAL_STATES else "held by"
    lines = [
        f"request   {request.id}",
        f"state     {story.state}" + (f" ({holding} {story.agent})" if story.agent else ""),
        f"tables    {', '.join(request.entities)}"
        + (f"  (done: {', '.join(story.tables_done)})" if story.tables_done else ""),
        f"created   {_time(request.created_at)} by {request.created_by or '-'}",
    ]
    facts = [
        ("deadline", request.deadline and _time(request.deadline)),
        ("schedule", request.schedule and f"{request.schedule.id} slot {request.schedule.slot}"),
        ("retry of", request.retry_of),
        ("retried", story.retried_as and f"as {story.retried_as}"),
        ("cancel", story.cancel and f"{story.cancel.describe()} at {_time(story.cancel.at)}"),
        ("why", story.why),
        *(("release", change) for change in story.release_changes),
        *(("problem", problem) for problem in story.problems),
    ]
    return lines + [f"{label:<9} {text}" for label, text in facts if text]


def _attempt_lines(story: RequestStory) -> list[str]:
    if not story.attempts:
        return []
    table: list[tuple[str, ...]] = [("#", "AGENT", "STARTED", "ENDED", "OUTCOME", "MESSAGE")]
    for a in story.attempts:
        row = (str(a.number), a.agent, _time(a.started_at), _time(a.ended_at), a.outcome)
        table.append((*row, a.message or ""))
    return ["", "ATTEMPTS", format_table(table)]


def _run_lines(story: RequestStory) -> list[str]:
    """The table runs, then what each run said (its message and the tail of its output)."""
    if not story.runs:
        return []
    table = [
        (
            "TABLE",
            "ATTEMPT",
            "AGENT",
            "TOKEN",
            "STARTED",
            "ENDED",
            "SECONDS",
            "STORE OPS",
            "OUTCOME",
        )
    ]
    for run in story.runs:
        outcome = run.outcome + (f" (exit {run.exit_code})" if run.exit_code else "")
        operations = run.store_operations
        table.append(
            (
                run.table,
                str(run.attempt),
                run.agent,
                str(run.fencing_token),
                _time(run.started_at),
                _time(run.ended_at),
                f"{run.seconds:.1f}",
                "-" if operations is None else str(operations),
                outcome,
            )
        )
    lines = ["", "TABLE RUNS", format_table(table)]
    for run in story.runs:
        if run.message or run.output or run.stdout:
            lines += ["", *run_output_lines(run)]
    return lines


def run_output_lines(run: RunStory) -> list[str]:
    """What a table run said: its message, then the tail of its output (stderr), then of its
    stdout if kept (``fdcore show``, and ``fdcore wait`` for a failed table)."""
    said = f": {run.message}" if run.message else ""
    lines = [f"{run.table} (attempt {run.attempt}){said}"]
    lines += [f"  | {line}" for line in (run.output or "").splitlines()]
    if run.stdout:
        lines += ["  stdout:", *(f"  | {line}" for line in run.stdout.splitlines())]
    return lines


def _request_arguments(parser: argparse.ArgumentParser, *, acts: bool) -> None:
    """What ``cancel``, ``retry`` and ``show`` share: the request, its environment, --json."""
    parser.add_argument("request", metavar="REQUEST", help="the request's id")
    add_environment_flags(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    if acts:
        parser.add_argument("--by", help="who acts (default: user@host)")


class Cancel:
    name = "cancel"
    help = "cancel a request: unclaimed it ends now, running its holder stops it"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--reason", help="why, kept in the cancel and the request's status")
        _request_arguments(parser, acts=True)

    def run(self, args: argparse.Namespace) -> int:
        return _cancel(args)


class Retry:
    name = "retry"
    help = "run a failed, expired or cancelled request again, as a new request"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--from-table", help="start at this table (default: the first)")
        _request_arguments(parser, acts=True)

    def run(self, args: argparse.Namespace) -> int:
        return _retry(args)


class Show:
    name = "show"
    help = "a request's story: attempts, table runs with their output, how it ended"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _request_arguments(parser, acts=False)

    def run(self, args: argparse.Namespace) -> int:
        return _show(args)


#: This module's commands, in the order ``fdcore --help`` lists them.
COMMANDS: tuple[Command, ...] = (Cancel(), Retry(), Show())
