"""The request checkers: agents never raise, no request stranded, every one final and
succeeded at most once, cancels honoured, archived history whole, a final state final.
"""

from __future__ import annotations

from typing import Any

from fdcore.abc import AgentLoad
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archived_ids, find_request_files
from fdcore.simulator.invariants import Checker, Violation, who
from fdcore.simulator.world import SimulatedAgent, World


class AgentsNeverRaise(Checker):
    """An agent's poll never raises: bad files and store outages are handled inside the poll."""

    invariant = "agent"
    title = "agents never raise out of a poll"

    def finish(self, world: World) -> list[Violation]:
        return [Violation(self.invariant, when, text) for when, text in world.agent_errors]


class NoStrandedRequests(Checker):
    """(6) With ``when_free``, a busy agent never holds an unstarted request while another live
    agent has a free worker.

    Watched after every poll and every crash, pause and resume. Stranded requests are counted
    under any claim policy (that is the figure that compares them); only ``when_free`` fails.
    """

    invariant = "6"
    title = "with when_free, no busy agent holds a request another agent has room for"

    def __init__(self, claim: str) -> None:
        self.enforced = claim == "when_free"
        self.stranded: dict[str, tuple[float, str]] = {}
        # Each live agent's load as its last step left it: only its own steps (polls,
        # reactions) change it, and the world's changes (start, crash, pause, resume), after
        # which every load is taken again. A poll so costs one load, not the fleet's.
        self.loads: dict[str, AgentLoad] = {}
        self.roomy: set[str] = set()  # live agents with a free worker
        self.full: set[str] = set()  # live agents with every worker busy and a request waiting

    def after_poll(self, world: World, agent: SimulatedAgent) -> None:
        self._took(agent)
        self._judge(world)

    def after_reaction(self, world: World, agent: SimulatedAgent) -> None:
        self.after_poll(world, agent)

    def after_change(self, world: World) -> None:
        self.loads.clear()
        self.roomy.clear()
        self.full.clear()
        for agent in world.agents:
            self._took(agent)
        self._judge(world)

    def _took(self, agent: SimulatedAgent) -> None:
        """Note the load ``agent`` has now (none if it is not live)."""
        name = agent.name
        self.roomy.discard(name)
        self.full.discard(name)
        if not (agent.live and agent.process):
            self.loads.pop(name, None)
            return
        load = self.loads[name] = agent.process.load()
        if load.running + load.waiting < load.concurrency:
            self.roomy.add(name)
        elif load.waiting and load.running >= load.concurrency:
            self.full.add(name)

    def _judge(self, world: World) -> None:
        if not self.roomy or not self.full:
            return
        for agent in world.agents:  # in the fleet's order, as the requests were always noted
            if agent.name in self.full and self.roomy - {agent.name}:
                assert agent.process is not None
                for request, work in agent.process.held.items():
                    if not work.running:
                        self.stranded.setdefault(request, (world.now, agent.name))

    def finish(self, world: World) -> list[Violation]:
        if not self.enforced:
            return []
        return [
            Violation(
                self.invariant,
                when,
                f"{request} waited unstarted on busy {agent} while another agent had room",
            )
            for request, (when, agent) in sorted(self.stranded.items())
        ]

    def summary(self) -> dict[str, Any]:
        return {"stranded requests": len(self.stranded)}


class EveryRequestFinal(Checker):
    """No request is lost: every request ends in a final state before the time limit."""

    invariant = "final"
    title = "every request ends final"

    def finish(self, world: World) -> list[Violation]:
        found = []
        if world.arrived < world.total:
            found.append(
                Violation(
                    self.invariant,
                    world.now,
                    f"only {world.arrived} of {world.total} requests arrived by the time limit",
                )
            )
        for request in sorted(world.trace.created):
            latest = world.trace.latest.get(request)
            if latest is None or not latest.final:
                where = f"{latest.state} on {latest.agent}" if latest else "never claimed"
                found.append(
                    Violation(
                        self.invariant,
                        world.now,
                        f"{request} not final at the end (t={world.now:.0f}): {where}",
                    )
                )
        return found


class SucceedsOnce(Checker):
    """No request succeeds twice: one ``succeeded`` status write at most per request."""

    invariant = "once"
    title = "no request succeeds twice"

    def finish(self, world: World) -> list[Violation]:
        found = []
        for request, writes in world.trace.status.items():
            successes = [w for w in writes if w.state == "succeeded"]
            if len(successes) > 1:
                who = ", ".join(f"{w.writer} at t={w.time:.1f}" for w in successes)
                found.append(
                    Violation(
                        self.invariant, successes[1].time, f"{request} succeeded twice: {who}"
                    )
                )
        return found


class CancelsHonoured(Checker):
    """An operator's cancel is honoured: no table of a request starts on an agent process after
    that process listed ``cancels/`` and found the request there (docs/operations.md)."""

    invariant = "cancel"
    title = "no table starts after its holder saw the request's cancel"

    def __init__(self) -> None:
        self.ended_cancelled = 0
        self.cancels = 0

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        first_seen: dict[tuple[str, int, str], int] = {}
        for seen in trace.cancels_seen:
            for request in seen.requests:
                first_seen.setdefault((seen.agent, seen.incarnation, request), seen.seq)
        self.cancels = len(trace.cancels)
        self.ended_cancelled = sum(
            1 for request in trace.cancels if trace.latest[request].state == "cancelled"
        )
        return [
            Violation(
                self.invariant,
                start.time,
                f"{start.request}: table {start.table} started on "
                f"{who(start.agent, start.incarnation)} after it saw the request's cancel",
            )
            for start in trace.table_starts
            if first_seen.get((start.agent, start.incarnation, start.request), start.seq)
            < start.seq
        ]

    def summary(self) -> dict[str, Any]:
        return {"cancels": self.cancels, "requests ended cancelled": self.ended_cancelled}


class ArchivedWhole(Checker):
    """With the product's retention (``--retention-keep``, ``--retention-runs``): every request
    is found whole once, live or archived, with the final state the trace last saw; a live
    request is never left without its status, nor a live run record without its request; and
    none is claimed again after it finished (the archive's moves lose nothing and make no
    request run twice; that no slot is created twice is SharedSchedules')."""

    invariant = "archived-whole"
    title = "retention loses no request and runs none twice"

    def __init__(self) -> None:
        self.archived = 0

    def finish(self, world: World) -> list[Violation]:
        if not (world.scenario.retention_keep or world.scenario.retention_runs):
            return []
        found = []
        mailbox = Mailbox(world.store)
        live_requests = set(mailbox.request_ids())
        live_statuses = set(mailbox.status_ids())
        self.archived = len(list(archived_ids(mailbox)))
        for request in sorted(world.trace.created):
            latest = world.trace.latest.get(request)
            files = find_request_files(mailbox, request)
            if files is None or files.request is None:
                found.append(Violation(self.invariant, world.now, f"{request} is lost"))
                continue
            state = files.status.state.value if files.status else None
            if latest is not None and latest.final and state != latest.state:
                found.append(
                    Violation(
                        self.invariant,
                        world.now,
                        f"{request} reads {state} ({'archived' if files.archived else 'live'}),"
                        f" its last status write was {latest.state}",
                    )
                )
            if request in live_requests and request not in live_statuses and latest is not None:
                found.append(
                    Violation(self.invariant, world.now, f"{request} left live without status")
                )
        for key in world.store.list("runs/"):
            request = key.split("/")[1]
            if request not in live_statuses:
                found.append(
                    Violation(self.invariant, world.now, f"{key} left live without its request")
                )
        for request, writes in world.trace.status.items():
            ended = next((w for w in writes if w.final), None)
            again = [
                w
                for w in writes
                if ended is not None
                and w.seq > ended.seq
                and not w.final
                and w.seq not in world.trace.withdrawn
            ]
            if again:
                found.append(
                    Violation(
                        self.invariant,
                        again[0].time,
                        f"{request} was {again[0].state} again by {again[0].writer} after it "
                        f"ended {ended.state if ended else ''}",
                    )
                )
        return found

    def summary(self) -> dict[str, Any]:
        return {"requests archived": self.archived}


class FinalStaysFinal(Checker):
    """(13) A request that is final is never claimed again, and archived history is never
    replaced: after a request's first final status, no status write lands for it but one its
    writer withdrew (a claim that landed after retention moved the request) or the same end
    again, no table of it starts, and no file once archived is changed or deleted. Exercised
    by ``--retention-runs`` (a retention process whose store calls land between an agent's)."""

    invariant = "13"
    title = "a request final once is never claimed again; archived history is never replaced"

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}  # what the retention process did, when there is one

    def finish(self, world: World) -> list[Violation]:
        trace = world.trace
        if world.retention is not None:
            self.runs = {
                "retention runs": world.stats["retention runs"],
                "retention runs killed": world.stats["retention runs killed"],
                "requests moved by retention runs": len(world.retention.tally.moved),
                "claims withdrawn after a move": len(trace.withdrawn),
            }
        found = []
        for request, writes in trace.status.items():
            ended_seq = trace.ended.get(request)
            if ended_seq is None:
                continue
            ended = next(w for w in writes if w.seq == ended_seq)
            for write in writes:
                if write.seq <= ended_seq or write.seq in trace.withdrawn:
                    continue
                if (write.state, write.attempt) != (ended.state, ended.attempt):
                    found.append(
                        Violation(
                            self.invariant,
                            write.time,
                            f"{request} ended {ended.state}, then {write.writer} wrote it"
                            f" {write.state} (attempt {write.attempt})",
                        )
                    )
                    break
        for start in trace.table_starts:
            ended_seq = trace.ended.get(start.request)
            if ended_seq is not None and start.seq > ended_seq:
                found.append(
                    Violation(
                        self.invariant,
                        start.time,
                        f"{who(start.agent, start.incarnation)} started {start.request}'s"
                        f" table {start.table} after the request ended",
                    )
                )
        for _seq, time, writer, key in trace.archive_replaced:
            found.append(Violation(self.invariant, time, f"{writer} replaced archived {key}"))
        return found

    def summary(self) -> dict[str, Any]:
        return dict(self.runs)
