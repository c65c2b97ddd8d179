"""Entry point ``simulator`` (group ``fdcore``): ``fdcore simulate``, added by ``fdcore_commands``.

The simulator defines its command the argparse way, :func:`fdcore.simulator.cli.register`
(``register(commands)`` adds a sub-parser and sets its ``run`` default); this module hands it the
parser the ``fdcore`` command made for it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from fdcore.abc import Command
from fdcore.plugins.hookspecs import hookimpl
from fdcore.simulator.cli import register

Run = Callable[[argparse.Namespace], int]


class _GivenParser:
    """Stands in for argparse's sub-parsers: ``add_parser`` returns the one parser given."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def add_parser(self, name: str, **settings: Any) -> argparse.ArgumentParser:
        self.parser.description = settings.get("description", self.parser.description)
        return self.parser


class Simulate:
    """``fdcore simulate``: the simulator's own command line, as a plugin command."""

    name = "simulate"
    help = "run real agents under a seeded simulator and check the invariants"

    def __init__(self) -> None:
        self._run: Run | None = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        register(_GivenParser(parser))
        self._run = parser.get_default("run")

    def run(self, args: argparse.Namespace) -> int:
        if self._run is None:
            raise RuntimeError("fdcore simulate: add_arguments was not called")
        return self._run(args)


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [Simulate()]
