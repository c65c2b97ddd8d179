"""Host admission ``lanes``: each table runs while its process holds the table's lane.

The lane is the table's lock file under ``<host>/lanes/``: a table waits (its run's ``poll``
answers None) while another process of the host holds the lane, whether an agent's table, a
dispatcher's queued row or a tool that took it by hand. The agent takes the lane before starting
the table and lets it go when the table's run has ended or was cancelled.

The lane is handed to the table process: the job's ``inherit`` carries the lane's descriptor,
which the command runner leaves open in the table process. The lane is free once the table
process has exited and the agent let go, so an agent killed while its table runs leaves the lane
held by the table process until that exits. A runner that starts no process (``python``) ignores
``inherit``: the agent alone holds the lane, until the run ends or the agent dies.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs

from fdcore.abc import HostGate, HostSlots, TableJob, TableResult, TableRun
from fdcore_admission.errors import AdmissionRefused
from fdcore_admission.lanes import Lanes

StartTable = Callable[[TableJob], TableRun]


class LaneGate:
    def __init__(self, lanes: Lanes) -> None:
        self.lanes = lanes

    def slots(self) -> HostSlots | None:
        return None  # lanes are per table: the host has no count of places

    def admit(self, job: TableJob, start: StartTable) -> TableRun:
        return LaneRun(self.lanes, job, start)


class LaneRun:
    def __init__(self, lanes: Lanes, job: TableJob, start: StartTable) -> None:
        self.lanes = lanes
        self.job = job
        self.start = start
        self.fd: int | None = None
        self.run: TableRun | None = None

    def poll(self) -> TableResult | None:
        if self.fd is None:
            try:
                self.fd = self.lanes.try_hold(self.job.table)
            except (AdmissionRefused, OSError) as exc:
                return TableResult(False, f"no lane for table {self.job.table}: {exc}")
            if self.fd is None:
                return None  # another process holds the table's lane
        if self.run is None:
            try:
                # a table process (the command runner) inherits the lane and holds it until it
                # exits (it dies with this agent, so no orphan keeps it)
                self.run = self.start(attrs.evolve(self.job, inherit=(*self.job.inherit, self.fd)))
            except Exception as exc:  # a runner that cannot start fails the table
                self._let_go()
                return TableResult(False, f"could not start: {exc}")
        result = self.run.poll()
        if result is not None:
            self._let_go()
        return result

    def cancel(self) -> None:
        if self.run is not None:
            self.run.cancel()
        self._let_go()

    def _let_go(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class LaneAdmission:
    name = "lanes"

    def open(self, host: str, options: dict[str, Any]) -> HostGate:
        return LaneGate(Lanes(host))
