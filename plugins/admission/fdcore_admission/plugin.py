"""Entry point ``admission`` (group ``fdcore``): host admission ``lanes``, ``fdcore admission``."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import Command, HostAdmission
from fdcore_admission.commands import AdmissionCommand
from fdcore_admission.gate import LaneAdmission


@hookimpl
def fdcore_host_admissions() -> Sequence[HostAdmission]:
    return [LaneAdmission()]


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [AdmissionCommand()]
