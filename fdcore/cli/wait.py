"""``fdcore wait ID`` and ``fdcore submit --wait``: wait for a request to end, and exit with a
status a scheduler can act on (docs/agents.md, "Waiting for a request").

Both go through :meth:`fdcore.environment.Environment.wait` (the one waiting loop; the command
only draws what it reports). On a terminal, stderr gets a line for each change the wait reports
(state, holder, attempt, the table running); at the end stdout gets the final line, and for a
failed request stderr gets the failed table's output tail. Off a terminal only those last lines
are printed, so a log or a script reads the outcome alone. ``--json`` prints the final story as
``fdcore show --json`` does (``fdcore submit --wait --json`` too, without the id line before
it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TextIO

from fdcore.cli.actions import _request_id, run_output_lines
from fdcore.cli.config import add_environment_flags
from fdcore.contract.codec import format_time
from fdcore.contract.models import Request
from fdcore.environment import FINAL_STATES, Environment, RequestStory
from fdcore.errors import (
    ConfigError,
    RequestCancelled,
    RequestDidNotSucceed,
    RequestExpired,
    RequestFailed,
    WaitTimedOut,
)
from fdcore.settings.checks import Duration, add_flag
from fdcore.terminal import is_terminal

SUCCEEDED = 0
FAILED = 1
EXPIRED = 3
CANCELLED = 4
TIMED_OUT = 124  # as timeout(1) exits: the wait gave up, the request goes on
#: The exit status of each way a request can end other than success (2 is every command's
#: "bad input or environment", an unknown request among them: fdcore.cli.main).
DID_NOT_SUCCEED: tuple[tuple[type[RequestDidNotSucceed], int], ...] = (
    (RequestFailed, FAILED),
    (RequestExpired, EXPIRED),
    (RequestCancelled, CANCELLED),
)

EXIT_STATUSES = (
    "exit status: 0 succeeded, 1 failed, 2 bad input or environment error (an unknown request "
    "too), 3 expired, 4 cancelled, 124 timed out waiting (the request goes on). "
    "See docs/agents.md."
)


def add_timeout_flag(parser: argparse.ArgumentParser) -> None:
    add_flag(
        parser,
        "--timeout",
        Duration(),
        metavar="DURATION",
        help="give up waiting after this long (30s, 15m, 2h; default: no limit), exit 124",
    )


def add_submit_flags(parser: argparse.ArgumentParser) -> None:
    """``fdcore submit``'s ``--wait``, ``--timeout`` and ``--json``, and the exit statuses in
    its help."""
    parser.add_argument(
        "--wait", action="store_true", help="wait until the request ends; exit with its outcome"
    )
    add_timeout_flag(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON document: the request queued; with --wait its final story, as"
        " fdcore wait --json prints it",
    )
    parser.epilog = "With --wait, " + EXIT_STATUSES


def check_submit_flags(args: argparse.Namespace) -> None:
    """Refuse ``--timeout`` without ``--wait`` before anything is submitted."""
    if args.timeout is not None and not args.wait:
        raise ConfigError("fdcore submit", "--timeout", "only with --wait")


def after_submit(args: argparse.Namespace, request: Request) -> int:
    """What ``fdcore submit`` prints and returns once ``request`` is queued: its id (with
    ``--json``, a document) and 0 at once, or with ``--wait`` its id and the outcome of waiting
    for it (with ``--json``, the final story alone: one document for a script to parse)."""
    if args.json and not args.wait:
        print(json.dumps(submitted_json(request), indent=2))
        return 0
    if not args.json:
        print(request.id, flush=True)  # the id first, for whoever reads the lines as they come
    if not args.wait:
        return 0
    return wait_for(args.env, request.id, args.timeout, as_json=args.json)


def submitted_json(request: Request) -> dict[str, object]:
    """``fdcore submit --json``'s document: the request as queued (or as it stood, for a
    submission repeated under its id)."""
    return {
        "request": request.id,
        "tables": list(request.entities),
        "created_at": format_time(request.created_at),
        "deadline": format_time(request.deadline) if request.deadline else None,
        "max_attempts": request.max_attempts,
    }


def wait_for(
    url: str,
    request_id: str,
    timeout: float | None,
    *,
    as_json: bool,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Wait for request ``request_id`` of environment ``url`` to end, print how it ended (see the
    module) and return the exit status. An unknown request or environment raises (exit 2)."""
    out, err = out or sys.stdout, err or sys.stderr
    progress = ProgressLines(err) if is_terminal(err) else None
    story: RequestStory | None
    with Environment.open(url) as environment:
        code = SUCCEEDED
        try:
            final = environment.wait(request_id, timeout, progress=progress)
            story, line = final, succeeded_line(final)
        except RequestDidNotSucceed as exc:
            story, line = exc.story, str(exc)
            code = next(status for kind, status in DID_NOT_SUCCEED if isinstance(exc, kind))
        except WaitTimedOut as exc:
            story, line, code = exc.story, str(exc), TIMED_OUT
    if as_json:
        document = story.to_json() if story else {"id": request_id, "state": "unknown"}
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(line + "\n")
    out.flush()
    if code == FAILED and story is not None:
        tail = failed_output(story)
        if tail:
            err.write("\n".join(tail) + "\n")
            err.flush()
    return code


def succeeded_line(story: RequestStory) -> str:
    by = f"; by {story.agent}" if story.agent else ""
    return f"request {story.id} succeeded (tables {', '.join(story.request.entities)}{by})"


def failed_output(story: RequestStory) -> list[str]:
    """The last failed table run's message and output tail, as ``fdcore show`` prints them."""
    failed = [run for run in story.runs if run.outcome == "failed"]
    return run_output_lines(failed[-1]) if failed else []


def progress_line(story: RequestStory) -> str:
    """One line of where the request stands: its state, holder, attempt and table running."""
    parts = [f"request {story.id} {story.state}"]
    if story.agent and story.state not in FINAL_STATES:
        parts[0] += f" on {story.agent}"
    if story.attempts and story.state not in FINAL_STATES:
        parts.append(f"attempt {story.attempts[-1].number}")
    tables = story.request.entities
    done = len(story.tables_done)
    if story.state == "running" and done < len(tables):
        parts.append(f"table {tables[done]} ({done + 1}/{len(tables)})")
    return ", ".join(parts)


class ProgressLines:
    """The ``progress`` of :meth:`Environment.wait` on a terminal: a timed line on ``stream``
    for each change the wait reports (the same line twice is printed once)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._last = ""

    def __call__(self, story: RequestStory) -> None:
        line = progress_line(story)
        if line != self._last:
            self._last = line
            self.stream.write(f"{time.strftime('%H:%M:%S')}  {line}\n")
            self.stream.flush()


class Wait:
    name = "wait"
    help = "wait for a request to end; the exit status says how it ended"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("request", metavar="REQUEST", help="the request's id")
        add_environment_flags(parser)
        add_timeout_flag(parser)
        parser.add_argument(
            "--json", action="store_true", help="the final story, as fdcore show --json prints it"
        )
        parser.epilog = EXIT_STATUSES

    def run(self, args: argparse.Namespace) -> int:
        request_id = _request_id("wait", args.request)
        return wait_for(args.env, request_id, args.timeout, as_json=args.json)
