"""The simulator's trace decoder: what each write that lands means for the checkers.

Every write of an agent, of the retention process and of an operator's cancel lands in the
shared store through a :class:`~fdcore.simulator.store.FaultyStore`, which hands it here. The
decoder reads it back as agents would (through the mailbox and the codec) and records in the
:class:`~fdcore.simulator.trace.Trace` what the checkers judge: heartbeats, status writes, run
records, leases and who took them, removals, archived history. A status write also moves the
world's own progress (:meth:`World.status_landed`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from fdcore.agent.core import Agent
from fdcore.contract.models import AgentRecord, Lease, RunRecord, Status
from fdcore.mailbox.access import Mailbox
from fdcore.simulator.scenario import Scenario, seconds
from fdcore.simulator.trace import LeaseState, LeaseTaken, RunLogWrite, StatusWrite, Trace

#: The writer of a status an operator's cancel wrote.
OPERATOR = "operator"

#: What the decoder reads of a landed write, by folder (fences/ hold the lease as it was).
_WRITTEN: dict[str, type[Status | Lease | RunRecord]] = {
    "status": Status,
    "leases": Lease,
    "fences": Lease,
    "runs": RunRecord,
}


def _holding(lease: LeaseState) -> tuple[str, int, str, int]:
    return (lease.request, lease.attempt, lease.holder, lease.incarnation)


class Writer(Protocol):
    """The simulated agent whose write landed (:class:`~fdcore.simulator.world.SimulatedAgent`)."""

    name: str
    incarnation: int
    record_key: str
    skew: float
    process: Agent | None  # the Agent process running under its name now
    claimed: bool  # within its current poll: a request newly claimed


class WorldView(Protocol):
    """What the decoder reads of the world it serves (:class:`~fdcore.simulator.world.World`)."""

    now: float
    scenario: Scenario
    mailbox: Mailbox
    trace: Trace
    active: dict[str, StatusWrite]
    agent_errors: list[tuple[float, str]]

    @property
    def agents(self) -> Sequence[Writer]: ...

    def next_seq(self) -> int: ...

    def status_landed(self, write: StatusWrite) -> None: ...


class TraceDecoder:
    """Turns the writes that land into the world's :class:`Trace`."""

    def __init__(self, world: WorldView) -> None:
        self.world = world
        self.trace: Trace = world.trace
        # (request, attempt, holder, incarnation) -> the tables whose lease, as last written,
        # names it: what a status write vouches for, without a walk over every table
        self.leased: defaultdict[tuple[str, int, str, int], set[str]] = defaultdict(set)

    def retention_wrote(self, key: str, data: bytes | None) -> None:
        """A write of the retention process landed: its copies, and its deletes of live files."""
        seq = self.world.next_seq()
        if key.startswith("archive/"):
            self._archive(seq, "retention", key, data)
            return
        folder, _, name = key.partition("/")
        if data is None and folder in ("status", "requests"):
            self.trace.removals.append((self.world.now, "retention", folder, name[: -len(".json")]))

    def _archive(self, seq: int, writer: str, key: str, data: bytes | None) -> None:
        """Archived history is written once: a later write that changes it is kept to judge."""
        first = self.trace.archive.get(key)
        if first is None and data is not None:
            self.trace.archive[key] = data
        elif first is not None and data != first:
            self.trace.archive_replaced.append((seq, self.world.now, writer, key))

    def agent_wrote(self, agent: Writer, key: str, data: bytes | None) -> None:
        """A write by ``agent`` landed (``data`` None: a delete): keep what checkers need."""
        seq = self.world.next_seq()
        if key.startswith("archive/"):
            # retention's copies (the live files they copy were traced when written): kept only
            # to tell whether archived history is ever replaced
            self._archive(seq, agent.name, key, data)
            return
        if data is None:
            if key.startswith(("status/", "requests/")):
                self._removal(agent, key)
            return
        folder = key.partition("/")[0]
        if folder == "agents":
            self._record(agent, seq, key, data)
        elif folder in ("status", "leases", "fences", "runs"):
            # a schedule's request is traced in request_created
            written = self.world.mailbox.decode(_WRITTEN[folder], key, data)
            if written.request.startswith("sched-"):
                self.trace.schedule_writes[written.request] += 1
            if isinstance(written, Status):
                self.status(agent, seq, written)
            elif isinstance(written, RunRecord):
                self._run(agent, seq, key, data, written)
            elif folder == "leases":
                self._lease(agent, seq, written)

    def _record(self, agent: Writer, seq: int, key: str, data: bytes) -> None:
        """Every poll writes the agent's record: the key says whose it is."""
        if key != agent.record_key:
            return
        beats = self.trace.heartbeats.setdefault((agent.name, agent.incarnation), [])
        beats.append((seq, self.world.now))
        # As written: by its clock, or in the store's time once it measured its clock far off
        # (fdcore.agent.skew).
        updated_at = seconds(self.world.mailbox.decode(AgentRecord, key, data).updated_at)
        writes = self.trace.record_writes.setdefault(agent.name, [])
        writes.append((seq, self.world.now, updated_at))

    def _run(self, agent: Writer, seq: int, key: str, data: bytes, run: RunRecord) -> None:
        if self.trace.run_records.get(key) == data:
            return  # the same record again, after retention moved the first: not a second
        self.trace.run_records.setdefault(key, data)
        lease = self.trace.leases.get(run.table)
        self.trace.run_log.append(
            RunLogWrite(
                seq=seq,
                time=self.world.now,
                writer=agent.name,
                incarnation=agent.incarnation,
                request=run.request,
                table=run.table,
                attempt=run.attempt,
                generation=run.generation,
                lease_generation=lease.generation if lease else None,
                outcome=run.outcome.value,
                vouched=(
                    run.request,
                    run.attempt,
                    run.table,
                    run.generation,
                    agent.name,
                    agent.incarnation,
                )
                in self.trace.held_at_status,
            )
        )

    def status(self, agent: Writer | None, seq: int, status: Status) -> None:
        """A status write landed: an agent's, or (``agent`` None) an operator's cancel."""
        request = status.request
        write = StatusWrite(
            seq=seq,
            time=self.world.now,
            writer=agent.name if agent else OPERATOR,
            incarnation=agent.incarnation if agent else 0,
            request=request,
            state=status.state.value,
            agent=status.agent,
            attempt=status.attempt,
            attempts=tuple((a.number, a.agent, a.outcome.value) for a in status.attempts),
            message=status.message,
            tables_done=tuple(status.tables_done),
        )
        self.trace.status.setdefault(request, []).append(write)
        if agent is not None:
            holding = (request, write.attempt, agent.name, agent.incarnation)
            for table in self.leased.get(holding, ()):
                generation = self.trace.leases[table].generation
                self.trace.held_at_status.add(
                    (request, write.attempt, table, generation, agent.name, agent.incarnation)
                )
        if agent is not None and request not in self.trace.latest and write.agent == agent.name:
            agent.claimed = True
        self.trace.latest[request] = write
        if write.final:
            self.trace.ended.setdefault(request, seq)
        self.world.status_landed(write)

    def _finished_by_holder(self, lease: LeaseState) -> bool:
        """The lease's request ended in its holder's attempt (succeeded or failed by it): its
        final status freed the lease (docs/takeover.md), as a release would."""
        latest = self.trace.latest.get(lease.request)
        return (
            latest is not None
            and latest.final
            and latest.agent == lease.holder
            and latest.attempt == lease.attempt
            and latest.outcome(lease.attempt) in ("succeeded", "failed")
        )

    def _removal(self, agent: Writer, key: str) -> None:
        """An agent deleted a request or a status: only retention may, and only of a request
        that is final, with its status last (checked by ArchivedWhole)."""
        folder, _, name = key.partition("/")
        request = name[: -len(".json")]
        latest = self.trace.latest.get(request)
        writes = self.trace.status.get(request, [])
        if (
            folder == "status"
            and latest is not None
            and (latest.writer, latest.incarnation) == (agent.name, agent.incarnation)
            and len(writes) > 1
            and writes[-2].final
        ):
            # Its own status over a request that had ended, withdrawn: a claim or expiry that
            # landed after retention moved the request (create_status). The end stands.
            self.trace.withdrawn.add(latest.seq)
            self.trace.latest[request] = writes[-2]
            self.world.active.pop(request, None)
            return
        if not self.world.scenario.retention_keep or latest is None or not latest.final:
            self.world.agent_errors.append((self.world.now, f"{agent.name} deleted {key}"))
            return
        self.trace.removals.append((self.world.now, agent.name, folder, request))

    def _lease_clock(self, name: str) -> float:
        """The time agent ``name`` writes and judges its leases by now: its clock, or the
        store's once it measured its clock far off (:meth:`fdcore.agent.tables.Tables.lease_now`).
        """
        agent = next(agent for agent in self.world.agents if agent.name == name)
        if agent.process is None:
            return self.world.now + agent.skew  # crashed: its lease is no live holder's
        return seconds(agent.process.tables.lease_now())

    def _lease(self, agent: Writer, seq: int, written: Lease) -> None:
        table = written.table
        lease = LeaseState(
            generation=written.generation,
            holder=written.holder,
            request=written.request,
            attempt=written.attempt,
            released=written.released,
            expires_at=seconds(written.expires_at),
            incarnation=agent.incarnation,
        )
        before = self.trace.leases.get(table)
        if (
            before
            and not before.released
            and before.holder != lease.holder
            and not self._finished_by_holder(before)
        ):
            clock = self._lease_clock(before.holder)
            self.trace.leases_taken.append(
                LeaseTaken(seq, self.world.now, table, before, lease, clock)
            )
        self.trace.leases[table] = lease
        if before is not None:
            self.leased[_holding(before)].discard(table)
        self.leased[_holding(lease)].add(table)
