"""The whole suite's collection: ``make test`` runs it on two workers (pytest-xdist,
``--dist loadgroup``), and every test that starts real processes, servers or a browser, or
races processes, goes to one group, run one after the other on one worker: they wait on real
time, so they get a core of their own beside the in-process tests instead of each other."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

#: What a test module that starts or races real processes (agents, Azurite, the S3 emulator,
#: chromium, the doctor's probes, wheels) says somewhere in its text.
STARTS_PROCESSES = re.compile(
    r"AgentFleet|AgentProcess|Popen|[Aa]zurite|S3Emulator|SIGKILL|SIGSTOP|chromium|playwright"
    r'|"doctor"|wheel|multiprocess = True|fdcore_fleet|agent_process'
)
PROCESSES = pytest.mark.xdist_group("processes")


@cache
def _starts_processes(path: Path) -> bool:
    return STARTS_PROCESSES.search(path.read_text(encoding="utf-8")) is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _starts_processes(item.path):
            item.add_marker(PROCESSES)
