"""``fdcore incidents list|show|ack|resolve|note|evaluate``: an environment's incidents.

``evaluate`` is the one-shot evaluation for an environment no running agent watches (cron-able):
it opens, bumps and resolves incidents, and with ``--config`` delivers them through that
agent.toml's routes. It exits non-zero only on its own errors (an unreachable or missing
environment, a bad option), never because incidents are open.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from collections.abc import Callable
from datetime import datetime, timezone

from fdcore.cli.config import load_config
from fdcore.cli.output import format_table
from fdcore.contract.codec import to_dict
from fdcore.contract.models import Incident
from fdcore.environment import Environment
from fdcore.environment.named import resolve as resolve_environment
from fdcore.errors import ConfigError
from fdcore.incidents.book import IncidentBook, add_note, lookup, resolve
from fdcore.incidents.delivery import claim_posts, send_posts
from fdcore.incidents.evaluate import LOOKBACK, evaluate
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins
from fdcore.plugins.routes import open_routes
from fdcore.plugins.storage import open_environment
from fdcore.settings.checks import GRACE, add_flag


def _open(url: str) -> Environment:
    # Only an existing environment: "not set up" is one clear error, never an incident.
    return Environment.open(url, via="cli")


def _who(args: argparse.Namespace) -> str:
    if args.by:
        return str(args.by)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER") or "unknown"


def _time(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value else "-"


def _list(args: argparse.Namespace) -> int:
    with _open(args.env) as environment:
        incidents = environment.incidents(include_resolved=args.all)
    if args.json:
        print(json.dumps({"incidents": [to_dict(i) for i in incidents]}, indent=2))
        return 0
    table = [
        ("INCIDENT", "STATE", "KIND", "SUBJECT", "FIRST SEEN", "LAST SEEN", "OCCURRENCES", "ROUTES")
    ]
    for incident in incidents:
        table.append(
            (
                incident.id,
                incident.state.value,
                incident.kind or "-",
                incident.subject or "-",
                _time(incident.opened_at),
                _time(incident.last_seen),
                str(incident.count),
                ", ".join(incident.notified) or "-",
            )
        )
    print(format_table(table))
    return 0


def _describe(incident: Incident) -> str:
    lines = [
        f"{incident.id}  {incident.state.value}  {incident.title}",
        f"  key:        {incident.key}",
        f"  message:    {incident.message or '-'}",
        f"  first seen: {_time(incident.opened_at)} by {incident.opened_by}",
        f"  last seen:  {_time(incident.last_seen)}",
        f"  occurrences: {incident.count}",
    ]
    if incident.acknowledged_at:
        lines.append(
            f"  acknowledged: {_time(incident.acknowledged_at)} by {incident.acknowledged_by}"
        )
    if incident.resolved_at:
        lines.append(f"  resolved:   {_time(incident.resolved_at)} by {incident.resolved_by}")
    for record in incident.deliveries:
        what = "escalated to" if record.escalation else "posted to"
        result = f": FAILED {record.error}" if record.error else ""
        lines.append(f"  {what} {record.route} at {_time(record.at)} by {record.by}{result}")
    for note in incident.notes:
        lines.append(f"  note {_time(note.at)} {note.by}: {note.text}")
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    with _open(args.env) as environment:
        incident = lookup(IncidentBook(environment.mailbox).read(), args.incident)
    print(json.dumps(to_dict(incident), indent=2) if args.json else _describe(incident))
    return 0


def _change(args: argparse.Namespace) -> int:
    now = datetime.now(timezone.utc)
    who = _who(args)
    with _open(args.env) as environment:
        book = IncidentBook(environment.mailbox)
        if args.incidents_command == "ack":
            incident = environment.acknowledge(args.incident, by=who)
        elif args.incidents_command == "resolve":
            incident = book.change(lambda d: resolve(d, args.incident, now, who))
        else:
            if not args.text.strip():
                raise ConfigError("fdcore incidents note", "TEXT", "is empty")
            incident = book.change(lambda d: add_note(d, args.incident, args.text, now, who))
    if args.json:
        print(json.dumps(to_dict(incident), indent=2))
    else:
        print(f"{incident.id} {incident.state.value}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    plugins = load_plugins()
    config = load_config(args.config, plugins) if args.config else None
    url = args.env or (config.environment if config else None)
    if url is None:
        raise ConfigError("fdcore incidents evaluate", "--env", "missing (or give --config)")
    if config is not None and url == config.environment:  # with the agent's storage options
        storage = open_environment(config, plugins)
    else:  # a URL, a named environment or an agent.toml, with its storage options
        target = resolve_environment(url)
        storage = plugins.open_storage(target.url, target.options, target.backend, create=False)
    book = IncidentBook(Mailbox(storage))
    now = datetime.now(timezone.utc)
    by = args.by or "fdcore incidents evaluate"
    objectives = config.incidents.objectives if config is not None else ()
    lookback = config.incidents.lookback if config is not None else LOOKBACK
    outcome = evaluate(book, now, args.grace, by, objectives, lookback)
    for problem in outcome.problems:
        print(f"warning: {problem}")
    for verb, incidents in (
        ("opened", outcome.opened),
        ("still open", outcome.bumped),
        ("resolved", outcome.resolved),
    ):
        for incident in incidents:
            print(f"{verb} {incident.id} {incident.key}")
    if config is not None:
        posts = claim_posts(book, config.routes, now, by)
        deliveries = send_posts(book, open_routes(config, plugins), url, posts, now, by)
        for post, delivery in zip(posts, deliveries, strict=True):
            ids = ",".join(i.id for i in post.incidents)
            state = "posted" if delivery.delivered else f"FAILED ({delivery.error})"
            print(f"{state} {ids} to {post.route.name}")
    storage.close()
    return 0


#: What each subcommand of ``fdcore incidents`` runs.
SUBCOMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": _list,
    "show": _show,
    "ack": _change,
    "resolve": _change,
    "note": _change,
    "evaluate": _evaluate,
}


class Incidents:
    name = "incidents"
    help = "list, acknowledge, resolve and evaluate incidents"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="incidents_command", required=True, metavar="COMMAND")

        def command(name: str, text: str, *, incident: bool = False) -> argparse.ArgumentParser:
            parser: argparse.ArgumentParser = sub.add_parser(name, help=text)
            parser.add_argument("--env", required=name != "evaluate", help="environment URL")
            parser.add_argument("--json", action="store_true", help="machine-readable output")
            if incident:
                parser.add_argument("incident", metavar="INCIDENT", help="incident id or key")
            return parser

        command("list", "open incidents").add_argument(
            "--all", action="store_true", help="the resolved ones too (newest first)"
        )
        command("show", "one incident with its deliveries and notes", incident=True)
        for name, text in (("ack", "acknowledge: a person knows"), ("resolve", "resolve by hand")):
            command(name, text, incident=True).add_argument(
                "--by", help="who (default: the user name)"
            )
        note = command("note", "add a note (a mitigation)", incident=True)
        note.add_argument("text", metavar="TEXT")
        note.add_argument("--by", help="who (default: the user name)")
        evaluate_parser = command("evaluate", "evaluate once (cron-able)")
        evaluate_parser.add_argument(
            "--config", help="agent.toml whose routes deliver the incidents"
        )
        add_flag(
            evaluate_parser,
            "--grace",
            GRACE,
            help="seconds past stale_after before offline",
        )
        evaluate_parser.add_argument("--by", help="who evaluates (recorded on incidents)")

    def run(self, args: argparse.Namespace) -> int:
        return SUBCOMMANDS[args.incidents_command](args)
