"""The ``fdcore`` command. Each subcommand lives in the module that does its work."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fdcore import __version__
from fdcore.cli import commands as cli_commands
from fdcore.cli import demo, doctor, notify
from fdcore.cli.output import format_table
from fdcore.errors import FdcoreError, PluginError
from fdcore.plugins.manager import COMMAND, DISABLE_VARIABLE, Plugins, load_plugins

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


def build_parser(plugins: Plugins | None = None) -> argparse.ArgumentParser:
    """The ``fdcore`` parser: fdcore's commands and those of ``plugins`` (default: installed)."""
    parser = argparse.ArgumentParser(prog="fdcore", description=__doc__)
    parser.add_argument("--version", action="version", version=f"fdcore {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser("plugins", help="list installed plugins and what they provide")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(run=_plugins)

    # fdcore's own commands, each defined next to its work with ``register(commands)``; plugins
    # add theirs through the ``fdcore_commands`` hook (``simulate`` is the simulator's)
    for register in (cli_commands.register, demo.register, doctor.register, notify.register):
        register(commands)
    try:
        _add_plugin_commands(commands, plugins or load_plugins())
    except PluginError as exc:  # the parser cannot be built: say why, as a failed command would
        parser.exit(2, f"fdcore: error: {exc}\n")
    return parser


def _add_plugin_commands(commands: Any, plugins: Plugins) -> None:
    """The commands plugins add through ``fdcore_commands``; fdcore's own names are taken."""
    for name, command in plugins.implementations(COMMAND).items():
        if name in commands.choices:
            raise PluginError(
                f"command {name!r} of plugin {plugins.provider(COMMAND, name)} is one of "
                f"fdcore's own commands; disable the plugin with {DISABLE_VARIABLE}"
            )
        parser = commands.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(parser)
        parser.set_defaults(run=command.run)


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
