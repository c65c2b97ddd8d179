"""The whole suite's collection: ``make test`` runs it on two workers (pytest-xdist,
``--dist loadgroup``), and every test marked ``processes`` (it starts real processes, servers or
a browser, or races processes) goes to one group, run one after the other on one worker: they
wait on real time, so they get a core of their own beside the in-process tests instead of each
other. A test that asks for a process-starting fixture without the marker stops the collection;
tests/test_process_marker.py checks the modules that call the process-starting helpers."""

from __future__ import annotations

import pytest

PROCESSES = pytest.mark.xdist_group("processes")
#: Fixtures that start processes: real agents, Azurite, moto's S3 server.
STARTS_PROCESSES = frozenset({"fdcore_fleet", "azurite", "s3"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = []
    for item in items:
        if item.get_closest_marker("processes") is not None:
            item.add_marker(PROCESSES)
        elif STARTS_PROCESSES.intersection(getattr(item, "fixturenames", ())):
            unmarked.append(item.nodeid)
    if unmarked:
        raise pytest.UsageError(
            f"{len(unmarked)} tests start processes through a fixture "
            f"({', '.join(sorted(STARTS_PROCESSES))}) without the processes marker "
            f"(pytestmark = pytest.mark.processes), first {unmarked[0]}"
        )
