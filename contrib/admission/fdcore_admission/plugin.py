"""Entry point ``admission`` (group ``fdcore``): host admission ``lanes``."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import HostAdmission
from fdcore_admission.gate import LaneAdmission


@hookimpl
def fdcore_host_admissions() -> Sequence[HostAdmission]:
    return [LaneAdmission()]
