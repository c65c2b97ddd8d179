"""The agent's side: each table runs in a host slot, taken when free and given back at its end.

A table waits (its run's ``poll`` answers None) while the host is full or its folder refuses,
so nothing runs on a host whose capacity cannot be read; the table's mailbox lease is renewed
by the agent meanwhile, as for any run under way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fdcore.abc import HostGate, HostSlots, TableJob, TableResult, TableRun
from fdcore_hostslots.errors import HostBusy, HostSlotError, SlotLost
from fdcore_hostslots.host import Host, SlotLease

log = logging.getLogger("fdcore.hostslots")

StartTable = Callable[[TableJob], TableRun]


class SlotGate:
    """The ``slots`` admission of one host folder for one agent."""

    def __init__(self, host: Host, agent: str, lease_seconds: float) -> None:
        self.host = host
        self.agent = agent
        self.lease_seconds = lease_seconds
        self._problem = ""  # the host's last refusal, logged once until it changes

    def slots(self) -> HostSlots | None:
        try:
            slots = self.host.slots()
        except (HostSlotError, OSError) as exc:
            if str(exc) != self._problem:
                log.warning("%s: host admits nothing: %s", self.agent, exc)
                self._problem = str(exc)
            return HostSlots(0, 0)  # fail closed: a host folder we cannot read has no slot
        if self._problem:
            log.info("%s: host usable again", self.agent)
            self._problem = ""
        return slots

    def admit(self, job: TableJob, start: StartTable) -> TableRun:
        return AdmittedRun(self, job, start)


class AdmittedRun:
    """A table run that first waits for a host slot, then runs, then frees the slot."""

    def __init__(self, gate: SlotGate, job: TableJob, start: StartTable) -> None:
        self.gate = gate
        self.job = job
        self.start = start
        self.lease: SlotLease | None = None
        self.run: TableRun | None = None
        self._refusal = ""  # the last reason logged, so a long wait logs once per reason

    def poll(self) -> TableResult | None:
        if self.lease is None and not self._take_slot():
            return None
        if self.run is None:
            try:
                self.run = self.start(self.job)
            except Exception as exc:  # a runner that cannot start fails the table
                self._release()
                return TableResult(False, f"could not start: {exc}")
        result = self.run.poll()
        if result is not None:
            self._release()
            return result
        return self._keep_slot()

    def cancel(self) -> None:
        if self.run is not None:
            self.run.cancel()
        self._release()

    def _take_slot(self) -> bool:
        host, job = self.gate.host, self.job
        try:
            self.lease = host.acquire(
                holder=self.gate.agent,
                request=job.request,
                table=job.table,
                scope="task",
                lease_seconds=self.gate.lease_seconds,
            )
        except (HostSlotError, OSError) as exc:
            reason = getattr(exc, "code", type(exc).__name__)
            if reason != self._refusal:
                level = logging.INFO if isinstance(exc, HostBusy) else logging.WARNING
                log.log(
                    level, "%s: table %s waits for the host: %s", self.gate.agent, job.table, exc
                )
                self._refusal = reason
            return False
        return True

    def _keep_slot(self) -> TableResult | None:
        """Renew the slot once a third of its lease time has passed; stop if it was lost."""
        lease = self.lease
        assert lease is not None and self.run is not None
        if self.gate.host.clock() - lease.renewed_at < lease.lease_seconds / 3:
            return None
        try:
            self.lease = self.gate.host.renew(lease.request, lease.token)
        except SlotLost as exc:
            self.run.cancel()
            self.lease = None
            return TableResult(False, f"host slot lost: {exc}")
        except (HostSlotError, OSError) as exc:
            log.warning("%s: host slot not renewed, will retry: %s", self.gate.agent, exc)
        return None

    def _release(self) -> None:
        lease, self.lease = self.lease, None
        if lease is None:
            return
        try:
            self.gate.host.release(lease.request, lease.token)
        except (HostSlotError, OSError) as exc:  # it runs out after its lease time
            log.warning("%s: host slot not released: %s", self.gate.agent, exc)


class Slots:
    """Host admission ``slots``: durable execution slots in a host folder (docs/host.md)."""

    name = "slots"

    def open(self, host: str, options: dict[str, Any]) -> HostGate:
        folder = Host(host)
        folder.slots()  # refuse a host folder that cannot be used now, at start-up
        return SlotGate(folder, str(options["agent"]), float(options["lease_seconds"]))
