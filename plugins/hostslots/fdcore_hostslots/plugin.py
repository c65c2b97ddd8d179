"""Entry point ``hostslots`` (group ``fdcore``): host admission ``slots`` and ``fdcore host``."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import Command, HostAdmission
from fdcore_hostslots.commands import HostCommand
from fdcore_hostslots.gate import Slots


@hookimpl
def fdcore_host_admissions() -> Sequence[HostAdmission]:
    return [Slots()]


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [HostCommand()]
