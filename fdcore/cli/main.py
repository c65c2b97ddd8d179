"""The ``fdcore`` command. Each subcommand lives in the module that does its work."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fdcore import __version__
from fdcore.cli.output import format_table
from fdcore.errors import FdcoreError
from fdcore.plugins.manager import load_plugins

Command = Callable[[argparse.Namespace], int]


def _plugins(args: argparse.Namespace) -> int:
    plugins = load_plugins()
    if args.json:
        rows = [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "provides": info.provides,
                "error": info.error,
            }
            for info in plugins.infos
        ]
        print(json.dumps(rows, indent=2))
        return 0
    table = [("PLUGIN", "DISTRIBUTION", "VERSION", "PROVIDES")]
    for info in plugins.infos:
        provides = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in info.provides.items())
        table.append(
            (
                info.name,
                info.distribution or "-",
                info.version or "-",
                f"FAILED TO LOAD: {info.error}" if info.error else provides,
            )
        )
    print(format_table(table))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fdcore", description=__doc__)
    parser.add_argument("--version", action="version", version=f"fdcore {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plugins = commands.add_parser("plugins", help="list installed plugins and what they provide")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")
    plugins.set_defaults(run=_plugins)

    for register in _registrars():
        register(commands)
    return parser


def _registrars() -> list[Callable[[Any], None]]:
    """Subcommands defined next to their work; each module has ``register(commands)``."""
    import importlib

    found = []
    for name in ("fdcore.cli.commands", "fdcore.cli.demo", "fdcore.cli.doctor", "fdcore.simulator"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        found.append(module.register)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    run: Command = args.run
    try:
        return run(args)
    except FdcoreError as exc:
        print(f"fdcore: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
