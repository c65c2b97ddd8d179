"""Entry point ``simulator`` (group ``fdcore``): ``fdcore simulate``, from ``fdcore_commands``."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore.abc import Command
from fdcore.plugins.hookspecs import hookimpl
from fdcore.simulator.cli import Simulate


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [Simulate()]
