"""``fdcore notify test``: send a test notification through each route of an agent.toml.

It opens the routes exactly as an agent does at start-up (so a bad route fails the same way) and
prints one line per route. Exit status: 0 when every route delivered, 1 when one failed, 2 for a
configuration error.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from fdcore.abc import Notification
from fdcore.cli.config import load_config
from fdcore.errors import ConfigError
from fdcore.plugins.manager import load_plugins
from fdcore.plugins.routes import open_routes
from fdcore.settings.agent_toml import AgentConfig


def probe_notification(config: AgentConfig, route: str, now: datetime) -> Notification:
    """The notification ``fdcore notify test`` sends: says who sent it, and that it is a test."""
    return Notification(
        environment=config.environment,
        incident_id=f"test-{now:%Y%m%dT%H%M%S}",
        title=f"fdcore test notification from agent {config.name}",
        severity="info",
        text=f"Sent by 'fdcore notify test' to check route {route}; nothing is wrong.",
        route=route,
    )


def _notify_test(args: argparse.Namespace) -> int:
    plugins = load_plugins()
    config = load_config(args.config, plugins)
    routes = open_routes(config, plugins)
    if not routes.names:
        raise ConfigError(config.source, "[notify.routes]", "no notification routes configured")
    names = routes.names
    if args.route is not None:
        if args.route not in names:
            raise ConfigError(
                "fdcore notify test",
                "--route",
                f"no route {args.route!r} in {config.source} (routes: {', '.join(names)})",
            )
        names = [args.route]
    now = datetime.now(timezone.utc)
    failed = 0
    for name in names:
        delivery = routes.send(probe_notification(config, name, now))
        if delivery.delivered:
            print(f"OK {name} ({delivery.notifier})")
        else:
            failed += 1
            print(f"FAILED {name} ({delivery.notifier}): {delivery.error}")
    return 1 if failed else 0


class Notify:
    name = "notify"
    help = "check notification routes"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        commands = parser.add_subparsers(dest="notify_command", required=True, metavar="COMMAND")
        test = commands.add_parser(
            "test", help="send a test notification through each route of agent.toml"
        )
        test.add_argument("--config", required=True, help="path to agent.toml")
        test.add_argument("--route", help="only this route (default: every route)")

    def run(self, args: argparse.Namespace) -> int:
        return _notify_test(args)  # ``test``, its one subcommand
