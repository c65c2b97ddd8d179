"""``fdcore monitor --env URL``: serve the monitor page of one environment until interrupted.

Binds loopback unless told otherwise. With ``--allow-actions`` it makes a token
(``secrets.token_urlsafe``) and prints the address to open with it, as Jupyter does; the page
sends it with each action, and without it an action is refused (HTTP 403).
"""

from __future__ import annotations

import argparse
import getpass
import os
import secrets
import socket

import uvicorn

from fdcore.errors import ConfigError
from fdcore.settings.checks import GRACE, Seconds, Whole, add_flag
from fdcore_monitor.actions import Actions
from fdcore_monitor.app import LOOPBACK, Settings, create_app
from fdcore_monitor.snapshot import Source

DEFAULT_PORT = 8421


def _who(given: str | None) -> str:
    if given:
        return given
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER") or "unknown"


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a taken port is one clear error (and ``--port 0``
    picks a free one, whose number is printed)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)  # connections wait in the backlog until the server runs
    except OSError as exc:
        raise ConfigError(
            "fdcore monitor", "--host/--port", f"cannot listen on {host}:{port}: {exc.strerror}"
        ) from None
    return sock


class MonitorCommand:
    """``fdcore monitor``: the live page and ``/metrics`` of one environment."""

    name = "monitor"
    help = "serve a live page of an environment (agents, queue, requests) and /metrics"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--env", help="environment URL, or the name of one (docs/monitor.md)")
        where.add_argument(
            "--config", dest="env", metavar="AGENT_TOML", help="the environment of agent.toml"
        )
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback)")
        add_flag(parser, "--port", Whole(0, 65535), default=DEFAULT_PORT, help="TCP port (0: any)")
        parser.add_argument(
            "--allow-actions",
            action="store_true",
            help="allow cancel, retry and acknowledge from the page, with the printed token",
        )
        parser.add_argument("--by", help="who actions are recorded as (default: the user name)")
        add_flag(parser, "--grace", GRACE, help="seconds past stale_after before lost")
        parser.add_argument("--host-folder", help="a host folder: show its slots (docs/host.md)")
        parser.add_argument(
            "--host-admission", default="slots", help="the host admission (default: slots)"
        )
        add_flag(
            parser,
            "--refresh",
            Seconds(0.2, maximum=3600),
            default=2.0,
            help="seconds between the page's updates",
        )

    def run(self, args: argparse.Namespace) -> int:
        source = Source.open(
            args.env, grace=args.grace, host=args.host_folder, host_admission=args.host_admission
        )
        token = secrets.token_urlsafe(32) if args.allow_actions else None
        settings = Settings(
            source=source,
            environment=args.env,
            actions=Actions(token, _who(args.by)),
            bound_to=args.host,
            refresh=args.refresh,
        )
        app = create_app(settings)
        sock = _listen(args.host, args.port)
        port = sock.getsockname()[1]
        shown = f"[{args.host}]" if ":" in args.host else args.host
        address = f"http://{shown}:{port}/"
        print(f"fdcore monitor of {args.env}", flush=True)
        if token is None:
            print(f"open {address}  (actions are off: --allow-actions turns them on)", flush=True)
        else:
            print(f"open {address}?token={token}", flush=True)
            print("actions are on: the token above is needed for each", flush=True)
        if args.host not in LOOPBACK:
            print(
                f"warning: listening on {args.host}: whoever reaches it reads the page "
                "(docs/monitor.md, Security)",
                flush=True,
            )
        print(f"Prometheus metrics: {address}metrics", flush=True)
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        try:
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            source.environment.close()
        return 0
