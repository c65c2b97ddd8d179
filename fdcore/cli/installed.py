"""``fdcore plugins``: the installed plugins, what each provides, and what is wrong with any."""

from __future__ import annotations

import argparse
import json

from fdcore.cli.output import format_table
from fdcore.plugins.manager import DISABLE_VARIABLE, load_plugins


class PluginList:
    name = "plugins"
    help = "list installed plugins and what they provide"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args: argparse.Namespace) -> int:
        plugins = load_plugins()
        if args.json:
            rows = [
                {
                    "name": info.name,
                    "distribution": info.distribution,
                    "version": info.version,
                    "provides": info.provides,
                    "error": info.error,
                    "problems": info.problems,
                }
                for info in plugins.infos
            ]
            print(json.dumps(rows, indent=2))
            return 0
        table = [("PLUGIN", "DISTRIBUTION", "VERSION", "PROVIDES")]
        for info in plugins.infos:
            provides = "; ".join(
                f"{kind}: {', '.join(names)}" for kind, names in info.provides.items()
            )
            if info.error:
                provides = (
                    f"FAILED TO LOAD: {info.error}; fix it, or disable it with "
                    f"{DISABLE_VARIABLE}={info.distribution or info.name}"
                )
            problems = [f"PROBLEM: {problem}" for problem in info.problems]
            table.append(
                (
                    info.name,
                    info.distribution or "-",
                    info.version or "-",
                    "; ".join(part for part in (provides, *problems) if part),
                )
            )
        print(format_table(table))
        return 0
