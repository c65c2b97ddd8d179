"""Entry point ``monitor`` (group ``fdcore``): ``fdcore monitor``, added by ``fdcore_commands``."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import Command
from fdcore_monitor.command import MonitorCommand


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [MonitorCommand()]
