"""``fdcore audit``: the audit trail of workload actions (docs/operations.md).

One row per action (submit, cancel, retry, acknowledge, takeover, expiry, retention move), oldest
first; ``--json`` prints one JSON object a line, for a SIEM. A row that is not trusted (a file
malformed, oversized, or whose times or origin do not add up) is marked so, with why.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from fdcore.cli.config import add_environment_flags
from fdcore.cli.output import format_table
from fdcore.contract.codec import parse_time
from fdcore.durations import parse_duration
from fdcore.environment import AuditRow, Environment
from fdcore.errors import ConfigError
from fdcore.settings.checks import Whole, add_flag

#: The most rows one ``fdcore audit`` prints unless ``--limit`` says otherwise.
DEFAULT_LIMIT = 1000


def since_flag(command: str) -> Callable[[str], datetime]:
    """``--since`` of ``command``: an ISO 8601 time, or a duration back from now (``1h``,
    ``7d``); a ConfigError naming the command and the flag."""

    def since(text: str) -> datetime:
        try:
            return parse_time(text)
        except (ValueError, TypeError):
            pass
        try:
            return datetime.now(timezone.utc) - timedelta(seconds=parse_duration(text))
        except ValueError:
            raise ConfigError(
                command, "--since", f"expected an ISO 8601 time or a duration, got {text!r}"
            ) from None

    return since


def _row(row: AuditRow) -> tuple[str, ...]:
    event, at = row.event, row.at
    when = f"{at:%Y-%m-%d %H:%M:%S}" if at else "-"
    if event is None:
        return (when, "?", "?", "?", "?", "UNTRUSTED: " + "; ".join(row.problems))
    outcome = event.outcome if row.trusted else f"UNTRUSTED: {'; '.join(row.problems)}"
    return (when, event.action, event.subject, event.actor, event.via, outcome)


class Audit:
    name = "audit"
    help = "who did what to the workload: submits, cancels, retries, takeovers, retention"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_environment_flags(parser)
        parser.add_argument("--request", help="only the actions on this request")
        parser.add_argument(
            "--since",
            type=since_flag("fdcore audit"),
            help="from this ISO 8601 time, or this long ago (1h, 7d)",
        )
        add_flag(
            parser,
            "--limit",
            Whole(1, 1_000_000),
            default=DEFAULT_LIMIT,
            help=f"the newest this many (default {DEFAULT_LIMIT})",
        )
        parser.add_argument(
            "--archived",
            action="store_true",
            help="also the events retention archived (needs --since: one listing a day)",
        )
        parser.add_argument("--json", action="store_true", help="one JSON object a line")

    def run(self, args: argparse.Namespace) -> int:
        if args.archived and args.since is None:
            raise ConfigError("fdcore audit", "--archived", "needs --since (one listing a day)")
        with Environment.open(args.env) as environment:
            page = environment.audit(
                since=args.since, request=args.request, limit=args.limit, archived=args.archived
            )
        if args.json:
            for row in page.rows:
                print(json.dumps(row.to_json()))
        else:
            header = ("AT", "ACTION", "SUBJECT", "ACTOR", "VIA", "OUTCOME")
            print(format_table([header, *map(_row, page.rows)]))
        if page.left_off:
            print(
                f"warning: older actions left out (--limit {args.limit}; use --since)",
                file=sys.stderr,
            )
        return 0
