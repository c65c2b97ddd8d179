"""``fdcore retention run``: a retention run by hand (docs/retention.md).

It does what the agent holding the retention lease does once per ``every``, at once and over
every status: finished requests older than ``--keep`` move to ``archive/`` (or are deleted with
``--delete``). Safe beside running agents: each move is idempotent and uses ``If-Match`` deletes.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from typing import Any

from fdcore.agent.retention import Tally, run_retention
from fdcore.cli.config import add_environment_flags
from fdcore.durations import format_duration
from fdcore.environment.actions import open_mailbox, operator_name
from fdcore.settings.agent_toml import RetentionConfig
from fdcore.settings.checks import GRACE, Duration, add_flag
from fdcore.settings.declare import default_of


def _settings(args: argparse.Namespace) -> RetentionConfig:
    return RetentionConfig(keep=args.keep, archive=not args.delete)


def tally_json(tally: Tally, settings: RetentionConfig, dry_run: bool) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "action": "archive" if settings.archive else "delete",
        "keep": format_duration(settings.keep),
        "examined": tally.examined,
        "moved": tally.moved,
        "files_removed": tally.files,
        "audit_events": tally.events,
        "kept": dict(sorted(tally.kept.items())),
        "problems": tally.problems,
    }


def _run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    mailbox = open_mailbox(args.env, create=False)
    now = datetime.now(timezone.utc)
    tally = run_retention(
        mailbox, now, settings, args.grace, dry_run=args.dry_run, actor=operator_name(), via="cli"
    )
    if args.json:
        print(json.dumps(tally_json(tally, settings, args.dry_run), indent=2))
        return 0
    verb = "archived" if settings.archive else "deleted"
    if args.dry_run:
        verb = f"would be {verb}"
    for request_id in tally.moved:
        print(f"{request_id} {verb}")
    kept = ", ".join(f"{count} {reason}" for reason, count in sorted(tally.kept.items()))
    print(
        f"{len(tally.moved)} of {tally.examined} requests {verb}"
        f" (kept: {kept or 'none'}; {tally.files} live files removed)"
    )
    for problem in tally.problems:
        print(f"problem: {problem}")
    return 0


class Retention:
    name = "retention"
    help = "move finished requests to the archive"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="retention_command", required=True, metavar="COMMAND")
        run = sub.add_parser("run", help="archive (or delete) finished requests older than --keep")
        add_environment_flags(run)
        add_flag(
            run,
            "--keep",
            Duration(),
            # the declared default, read by the reader as a typed value is
            default=format_duration(default_of(RetentionConfig, "keep")),
            help='age of a finished request (default "%(default)s")',
        )
        run.add_argument("--delete", action="store_true", help="delete instead of archiving")
        run.add_argument(
            "--dry-run", action="store_true", help="say what would move; change nothing"
        )
        add_flag(
            run,
            "--grace",
            GRACE,
            help="seconds past a deadline before its request may go (default %(default)g)",
        )
        run.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args: argparse.Namespace) -> int:
        return _run(args)  # ``run``, its one subcommand
