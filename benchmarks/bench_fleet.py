"""Real agent processes draining queued work, waking for new work and for a 1 s schedule.

    .venv/bin/python benchmarks/bench_fleet.py drain --poll 5 0.01 --runs 3
    .venv/bin/python benchmarks/bench_fleet.py schedule --poll 5 --seconds 60
    .venv/bin/python benchmarks/bench_fleet.py size --agents 20 3 --shrink-to 3 --requests 1000
    .venv/bin/python benchmarks/bench_fleet.py slow --runs 3

``drain``: 3 agents x concurrency 2 on a local folder (python runner, the zero-work table of
``noop_tables.py``) drain ``--requests`` queued requests of 2 tables each (tables of their own,
so no two requests wait for one table's lease), then, with the fleet idle, one request at a time
is submitted and timed to its first table's start. The poll values of one invocation run
round-robin, so a noisy neighbour on the machine hits them alike; figures are medians over runs.

- requests/s: requests over the time from the first table's start to the last table's end
  (agent start-up, about a second of imports, is left out);
- gap: in each request, its second table's start minus its first table's end;
- idle start: a request submitted to an idle fleet, from the submit to its first table's start.

``schedule``: 3 agents share an ``every = "1s"`` schedule for ``--seconds``; reports the slots
due in that window, the slots that ran, and any slot that ran twice.

``size``: for each ``--agents`` N, N agents at the default settings (but ``claim =
"when_free"``: with the default, the first agent up claims the whole queue) drain ``--requests``
queued requests of 2 tables each out of ``--tables`` (shared, so requests wait for each other's
table leases). Each table writes through the fencing check and logs the write
(``fdcore.testing.tables:write_table``). Checked from the mailbox and that log: every request
succeeded, each with one attempt; its run records show each table once; no table written twice,
no write refused, no two accepted writes of one table overlapping in time. Then, the fleet idle,
each agent's store calls per poll (the agents run through ``counted_agent.py``); with
``--shrink-to`` M, all but M agents stop and those M are measured again. Reports the drain's wall
time (from the agents' start), the agents' CPU seconds, the load average during the drain, and
whether an idle poll made the same calls at every size (exit 1 if not, or if a check failed).

``slow``: a fleet starved of CPU, where live agents are late to write their records: ``--agents``
(30) agents on one local folder at ``stale_after = 5``, ``grace_seconds = 2``, poll 1 s,
concurrency 1, ``take_over = true`` and ``claim = "when_free"`` drain ``--requests`` (600)
requests of 1 or 2 short tables out of ``--tables`` (40), through the fencing check. No agent is
stopped or killed, so every lost attempt is a live agent taken over. Reports, per run, the
takeovers, the (request, table) pairs that succeeded twice (two accepted writes, or two
successful run records) and any two writers of one table at once; exit 1 if a table succeeded
twice or a request did not succeed.

``--azurite`` runs the same on the OneLake backend against a local Azurite, ``--s3`` on the S3
backend against moto's S3 server (fdcore_s3.testing). A drain also counts the tables that ran
more than once (it must be 0). Every invocation first prints the backend's raw conditional
creates per second (one client, one after another): divided by the writes a request costs,
that is the ceiling a fleet's requests/s is compared with. A drain measures that rate again
just before each run, and counts those writes from its agents' own logs (every create, replace
and delete they made, start-up, heartbeats and the idle requests included, over the requests
drained and timed idle); it reports them, all operations per request, the ceiling and the share
of it the fleet drew. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import attrs
from fdcore_onelake.testing import Azurite
from fdcore_s3.testing import S3Emulator, credentials_environment

from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.contract.layout import SIGNAL
from fdcore.contract.models import Outcome, State
from fdcore.environment.queue import QueueReader
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins
from fdcore.testing.assertions import (
    assert_each_table_succeeded_once,
    double_writers,
    successful_runs,
)
from fdcore.testing.tables import log_table_writes, table_writes

HERE = Path(__file__).resolve().parent
RUNNER = {"kind": "python", "function": "noop_tables:noop"}
CONTAINER = "bench"
SECRET_VARIABLE = "FDCORE_BENCH_AZURITE_CONNECTION"
FINAL = {state.value for state in State if state.final}
#: ``size``'s agents: the defaults (``claim = "when_free"``: with ``always`` the first agent up
#: would claim the whole queue while the others idle).
SIZE_SECTIONS: dict[str, Any] = {"agent": {}, "pipeline": {"claim": "when_free"}}


@attrs.define
class Place:
    """Where the fleet's environments go: a new local folder, or folders on one emulator."""

    azurite: Azurite | None = None
    s3: S3Emulator | None = None

    def environment(self, folder: Path) -> tuple[str, dict[str, str]]:
        """A new environment's URL and the agents' [storage] options."""
        if self.s3 is not None:
            os.environ.update(credentials_environment())  # boto3's chain, as agents read it
            return self.s3.url(CONTAINER, f"bench-{uuid.uuid4().hex[:12]}"), self.s3.options
        if self.azurite is None:
            return str(folder / "env"), {}
        os.environ[SECRET_VARIABLE] = self.azurite.connection_string
        url = self.azurite.url(CONTAINER, f"bench-{uuid.uuid4().hex[:12]}")
        return url, {"connection_string_env": SECRET_VARIABLE}


def noop_fleet(folder: Path, url: str, storage: dict[str, str] | None = None) -> AgentFleet:
    """A fleet (no agents yet) whose agents can run ``noop_tables``' tables, which log their
    runs under ``folder/tables`` (read back with :func:`_runs`)."""
    (folder / "tables").mkdir(parents=True, exist_ok=True)
    fleet = AgentFleet(folder, url, storage or {})
    fleet.add_pythonpath(HERE)
    fleet.env["FDCORE_BENCH_LOG"] = str(folder / "tables")
    return fleet


_KEPT: list[Path] = []  # the one folder kept_folder() makes its folders in


def kept_folder(prefix: str) -> Path:
    """A new folder, removed with the others when the benchmark exits, not after its run.

    Removing a run's thousands of files just before the next run charges their removal to it:
    on ext4 without a journal (these machines) a new file's inode is searched for past every
    inode freed in the last minutes, so each file the next run creates costs a scan
    (docs/benchmarks.md, "Beside its peers")."""
    if not _KEPT:
        _KEPT.append(Path(tempfile.mkdtemp(prefix="fdcore-bench-")))
        atexit.register(shutil.rmtree, _KEPT[0], True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_KEPT[0]))


def drain_fleet(fleet: AgentFleet, tables: int, what: str) -> list[dict[str, Any]]:
    """Start the fleet's agents, wait until ``tables`` table runs are logged, stop them; the runs.
    Stops the benchmark if they did not drain in 30 minutes or ran more or fewer tables."""
    try:
        for agent in fleet:
            agent.start()
        if not wait_until(lambda: len(_runs(fleet.folder)) >= tables, 1800, 0.05):
            raise SystemExit(f"{what}: did not drain in 30 min")
    finally:
        fleet.stop_all()
        fleet.kill_all()
    runs = _runs(fleet.folder)
    if len(runs) != tables:
        raise SystemExit(f"{what}: {len(runs)} table runs, not {tables}")
    return runs


def _fleet(
    folder: Path, poll: float, place: Place, schedule: dict[str, Any] | None, agents: int = 3
) -> AgentFleet:
    url, storage = place.environment(folder)
    fleet = noop_fleet(folder, url, storage)
    agent = {"poll_seconds": poll, "concurrency": 2, "stale_after": 30, "shutdown_grace": 20}
    for n in range(agents):
        sections: dict[str, Any] = {"agent": agent, "pipeline": {"claim": "when_free"}}
        sections["runner"] = RUNNER
        if schedule is not None:
            sections["schedules"] = [schedule]
        fleet.add(f"bench-{n}", sections)
    return fleet


#: The line an agent logs as it stops: its store operations since start, by kind.
OPERATIONS = re.compile(r"store operations since start: ((?:\w+ \d+(?:, )?)+)")
#: The kinds of store operation that write.
WRITES = ("create", "replace", "delete")


def logged_by_kind(log: Path) -> Counter[str]:
    """The store operations an agent's log says it made, by kind, at its last count."""
    found = OPERATIONS.findall(log.read_text(errors="replace")) if log.exists() else []
    if not found:
        return Counter()
    return Counter({kind: int(n) for kind, n in (part.split() for part in found[-1].split(", "))})


def _runs(folder: Path) -> list[dict[str, Any]]:
    lines = []
    for path in (folder / "tables").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.endswith("}"):
                lines.append(json.loads(line))
    return lines


def drain_once(
    poll: float, requests: int, idle_samples: int, place: Place, agents: int = 3
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        folder = Path(tmp)
        fleet = _fleet(folder, poll, place, None, agents)
        for n in range(requests):
            submit(fleet.mailbox, [f"t{n}-a", f"t{n}-b"], request_id=f"bench-{n:05d}")
        try:
            for agent in fleet:
                agent.start()
            if not wait_until(lambda: len(_runs(folder)) >= 2 * requests, 3600, 0.05):
                raise SystemExit(f"poll {poll}: the fleet did not drain {requests} requests")
            runs = _runs(folder)
            twice = sum(n > 1 for n in Counter((r["request"], r["table"]) for r in runs).values())
            if len(runs) != 2 * requests or twice:
                raise SystemExit(
                    f"poll {poll}: {len(runs)} table runs, not {2 * requests}; {twice} ran twice"
                )
            span = max(r["end"] for r in runs) - min(r["start"] for r in runs)
            by_request: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
            for run in runs:
                by_request[run["request"]][run["table"]] = run
            gaps = [
                tables[f"t{n}-b"]["start"] - tables[f"t{n}-a"]["end"]
                for n in range(requests)
                if len(tables := by_request[f"bench-{n:05d}"]) == 2
            ]
            starts = []
            for n in range(idle_samples):
                time.sleep(1.5)  # idle: every agent has polled at least once with nothing to do
                request = f"idle-{n}"
                submitted = time.time()
                submit(fleet.mailbox, [f"idle-{n}"], request_id=request)

                def started(request: str = request) -> bool:
                    return any(r["request"] == request for r in _runs(folder))

                wait_until(started, 3 * poll + 30, 0.01)
                first = min(r["start"] for r in _runs(folder) if r["request"] == request)
                starts.append(first - submitted)
        finally:
            fleet.stop_all()
            fleet.kill_all()
        # every operation the fleet made (start-up, idle looks and heartbeats included), per
        # request drained or timed idle
        counted = sum((logged_by_kind(agent.log) for agent in fleet), Counter())
    done = requests + idle_samples
    return {
        "writes_per_request": sum(counted[kind] for kind in WRITES) / done,
        "operations_per_request": sum(counted.values()) / done,
        "ran_twice": float(twice),
        "requests_per_s": requests / span,
        "span_s": span,
        "gap_median_ms": 1000 * statistics.median(gaps),
        "gap_p90_ms": 1000 * statistics.quantiles(gaps, n=10)[-1],
        "idle_start_median_s": statistics.median(starts) if starts else float("nan"),
        "idle_start_max_s": max(starts) if starts else float("nan"),
    }


def schedule_once(poll: float, seconds: float, place: Place, agents: int = 3) -> dict[str, float]:
    schedule = {"id": "tick", "shared": True, "entities": ["tick"], "every": "1s"}
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        folder = Path(tmp)
        fleet = _fleet(folder, poll, place, schedule, agents)
        try:
            for agent in fleet:
                agent.start()
            time.sleep(3)  # start-up: imports, first polls
            window_start = time.time()
            time.sleep(seconds)
            window_end = time.time()
            time.sleep(3)  # the window's last slots finish
        finally:
            fleet.stop_all()
            fleet.kill_all()
        runs = _runs(folder)
    # Slot ids of "every" schedules are the due time in epoch seconds.
    slots = Counter(int(r["request"].split("-")[2]) for r in runs)
    due = range(int(window_start) + 1, int(window_end) + 1)
    return {
        "due": len(due),
        "ran": sum(1 for slot in due if slots[slot] >= 1),
        "missed": sum(1 for slot in due if slots[slot] == 0),
        "doubled": sum(1 for slot in due if slots[slot] > 1),
    }


# -- size: real fleets at size ---------------------------------------------------------------------

COUNTED_AGENT = HERE / "counted_agent.py"
#: The table of ``size``: writes through the fencing check and logs each write (fdcore.testing).
WRITE_TABLE = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
#: Calls that are no store round trip: the watch (inotify on a local folder) is one call for the
#: process's life; the store's time of the last write comes with the write's answer.
NO_ROUND_TRIP = ("watch requests", "watch leases", "watch status", "last_write_time")
#: The agent's own record, rewritten every stale_after / 4 (a heartbeat), whatever the polls.
HEARTBEAT = "replace agents"


@attrs.define
class CountedAgent(AgentProcess):
    """An agent process started by counted_agent.py: its store's calls logged after each poll."""

    @property
    def counts(self) -> Path:
        return self.log.with_suffix(".counts")

    def polls(self) -> list[dict[str, Any]]:
        """One line per poll so far: time, idle, the store's calls since start-up by folder."""
        if not self.counts.exists():
            return []
        lines = self.counts.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]


def counted_fleet(
    folder: Path, place: Place, agents: int, sections: dict[str, Any]
) -> tuple[AgentFleet, list[CountedAgent]]:
    """``agents`` counted agents on a new environment with these agent.toml ``sections``
    (``agent`` at least), running WRITE_TABLE's tables."""
    url, storage = place.environment(folder)
    fleet = AgentFleet(folder, url, storage)
    log_table_writes(fleet, folder / "writes")
    counted = []
    for n in range(agents):
        added = fleet.add(f"agent-{n:02d}", {**sections, "runner": WRITE_TABLE})
        counts = str(added.log.with_suffix(".counts"))
        launcher = [sys.executable, str(COUNTED_AGENT), counts]
        counted.append(CountedAgent(added.name, added.config, added.log, added.env, None, launcher))
        fleet.agents[added.name] = counted[-1]
    return fleet, counted


@attrs.frozen
class PollCost:
    """The store calls of one idle poll: from one logged poll to the next."""

    calls: Counter[str]  # by kind and folder, less the first reads below
    first_reads: int  # keys read for the first time in the window: what changed since, once
    reads_again: int  # keys read again in the window


def idle_polls(agent: CountedAgent, after: float) -> list[PollCost]:
    """The polls ``agent`` made idle after ``after``. A key's first read in the window
    catches up with a change made before it (a status that became final since this agent last
    read it, the record of an agent that stopped): paid once a change, not once a poll, it is
    counted apart."""
    seen: set[str] = set()
    costs = []
    for before, this in itertools.pairwise(agent.polls()):
        if before["time"] <= after or not (before["idle"] and this["idle"]):
            continue
        calls = Counter(this["calls"])
        calls.subtract(before["calls"])
        # The change signal is what an idle poll reads, every poll by design: its calls count,
        # it is no catching up.
        reads = [read for read in this["read"] if read.partition(" ")[2] != SIGNAL]
        first = [read for read in reads if read not in seen]
        seen.update(reads)
        for read in first:
            call, _, key = read.partition(" ")
            calls[f"{call} {key.split('/')[0]}"] -= 1
        calls = Counter({kind: n for kind, n in calls.items() if n and kind not in NO_ROUND_TRIP})
        costs.append(PollCost(calls, len(first), len(reads) - len(first)))
    return costs


@attrs.frozen
class IdleCosts:
    """What the idle polls of a set of agents cost in store calls, first reads apart."""

    polls: int
    per_poll: float  # calls per poll, on average
    median: float  # calls of the median poll, its heartbeat apart
    most: dict[str, int]  # the most calls of each kind one poll made
    kinds: dict[str, float]  # calls of each kind per poll, on average
    first_reads: int  # in all these polls
    reads_again: int

    @classmethod
    def of(cls, agents: list[CountedAgent], after: float) -> IdleCosts:
        costs = [cost for agent in agents for cost in idle_polls(agent, after)]
        if not costs:
            raise SystemExit("no idle polls logged")
        kinds: Counter[str] = Counter()
        most: Counter[str] = Counter()
        for cost in costs:
            kinds.update(cost.calls)
            most |= cost.calls
        return cls(
            polls=len(costs),
            per_poll=kinds.total() / len(costs),
            median=statistics.median(cost.calls.total() - cost.calls[HEARTBEAT] for cost in costs),
            most=dict(sorted(most.items())),
            kinds={kind: n / len(costs) for kind, n in sorted(kinds.items())},
            first_reads=sum(cost.first_reads for cost in costs),
            reads_again=sum(cost.reads_again for cost in costs),
        )


@attrs.frozen
class Drained:
    """What a fleet's drain left in the mailbox and the table-write log."""

    requests: int
    succeeded: int
    tables_not_once: list[str]  # requests whose run records do not show each table once
    claimed_twice: list[str]  # requests whose status has more than one attempt
    writes: int
    written_twice: int  # (request, table) pairs with more than one accepted write
    refused: int  # writes the fencing check refused
    double_writers: int  # accepted writes of one table by two writers at once

    @classmethod
    def check(cls, fleet: AgentFleet, request_ids: list[str]) -> Drained:
        mailbox = fleet.mailbox
        succeeded, not_once, twice = 0, [], []
        for request_id in request_ids:
            status = mailbox.status(request_id)
            if status is not None and status.value.state is State.SUCCEEDED:
                succeeded += 1
            if status is None or len(status.value.attempts) != 1:
                twice.append(request_id)
            try:
                assert_each_table_succeeded_once(mailbox, request_id)
            except AssertionError:
                not_once.append(request_id)
        writes = table_writes(fleet)
        accepted = Counter((w.request, w.table) for w in writes if w.rejected is None)
        return cls(
            requests=len(request_ids),
            succeeded=succeeded,
            tables_not_once=not_once,
            claimed_twice=twice,
            writes=len(writes),
            written_twice=sum(n > 1 for n in accepted.values()),
            refused=sum(w.rejected is not None for w in writes),
            double_writers=len(double_writers(writes)),
        )

    @property
    def ok(self) -> bool:
        return (
            self.succeeded == self.requests
            and not self.tables_not_once
            and not self.claimed_twice
            and not self.written_twice
            and not self.double_writers
        )


def size_once(
    place: Place,
    agents: int,
    requests: int,
    tables: int,
    sections: dict[str, Any],
    idle_polls: int,
    shrink_to: int | None = None,
    timeout: float = 3600.0,
) -> dict[str, Any]:
    """``agents`` counted agents drain ``requests`` requests of 2 tables each out of ``tables``
    (shared: requests wait for each other's table leases); then, idle, each makes ``idle_polls``
    polls; with ``shrink_to``, all but that many stop and those make ``idle_polls`` more."""
    rng = random.Random(requests)
    poll = float(sections["agent"].get("poll_seconds", 5.0))
    stale_after = float(sections["agent"].get("stale_after", 60.0))
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        fleet, counted = counted_fleet(Path(tmp), place, agents, sections)
        ids = [f"r{n:05d}" for n in range(requests)]
        for request_id in ids:
            names = [f"t{n:03d}" for n in rng.sample(range(tables), 2)]
            submit(fleet.mailbox, names, request_id=request_id)
        queue = QueueReader(fleet.mailbox)
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        loads: list[float] = []
        started = time.monotonic()
        try:
            for process in counted:
                process.start()

            def finished() -> bool:
                loads.append(os.getloadavg()[0])
                return all(row.state in FINAL for row in queue.rows())

            if not wait_until(finished, timeout, 1.0):
                raise SystemExit(f"{agents} agents did not drain {requests} requests in time")
            drained_at = time.monotonic()
            figures: dict[str, Any] = {"agents": agents, "requests": requests}
            figures["drain_s"] = drained_at - started
            figures["idle"] = _idle(counted, poll, stale_after, idle_polls)
            if shrink_to is not None and shrink_to < agents:
                for process in counted[shrink_to:]:
                    process.signal(signal.SIGTERM)
                for process in counted[shrink_to:]:
                    process.wait(60)
                figures["idle_shrunk"] = _idle(counted[:shrink_to], poll, stale_after, idle_polls)
        finally:
            fleet.stop_all()
            fleet.kill_all()
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        writes = table_writes(fleet)
        figures["tables_s"] = max(w.end for w in writes) - min(w.start for w in writes)
        figures["agents_cpu_s"] = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
        figures["load_max"] = max(loads)
        figures["load_median"] = statistics.median(loads)
        figures["checked"] = Drained.check(fleet, ids)
    return figures


#: ``slow``'s agents (besides name and environment).
SLOW_SECTIONS: dict[str, Any] = {
    "agent": {"stale_after": 5, "poll_seconds": 1, "concurrency": 1},
    "pipeline": {"grace_seconds": 2, "take_over": True, "claim": "when_free"},
    "runner": WRITE_TABLE,
}


def slow_once(agents: int, requests: int, tables: int, seed: int) -> dict[str, int]:
    """``agents`` agents at SLOW_SECTIONS drain ``requests`` requests of 1 or 2 of ``tables``
    tables; what the mailbox and the write log say of takeovers and tables run twice."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        folder = Path(tmp)
        fleet = AgentFleet(folder, str(folder / "env"))
        log_table_writes(fleet, folder / "writes")
        for n in range(agents):
            fleet.add(f"agent-{n:02d}", SLOW_SECTIONS)
        ids = [f"q{n:03d}" for n in range(requests)]
        for request_id in ids:
            names = [f"t{n:02d}" for n in rng.sample(range(tables), rng.choice([1, 2]))]
            submit(fleet.mailbox, names, request_id=request_id)
        queue = QueueReader(fleet.mailbox)
        try:
            for agent in fleet:
                agent.start()
            if not wait_until(lambda: all(row.state in FINAL for row in queue.rows()), 1800, 1):
                raise SystemExit(f"{agents} agents did not drain {requests} requests in 30 min")
        finally:
            fleet.stop_all()
            fleet.kill_all()
        mailbox = fleet.mailbox
        succeeded = takeovers = records_twice = 0
        for request_id in ids:
            status = mailbox.status(request_id)
            assert status is not None
            succeeded += status.value.state is State.SUCCEEDED
            takeovers += sum(a.outcome is Outcome.LOST for a in status.value.attempts)
            records_twice += sum(n > 1 for n in successful_runs(mailbox, request_id).values())
        writes = table_writes(fleet)
        accepted = Counter((w.request, w.table) for w in writes if w.rejected is None)
        return {
            "requests": requests,
            "succeeded": succeeded,
            "takeovers": takeovers,
            "written_twice": sum(n > 1 for n in accepted.values()),
            "records_twice": records_twice,
            "refused": sum(w.rejected is not None for w in writes),
            "double_writers": len(double_writers(writes)),
        }


def _slow(args: argparse.Namespace) -> None:
    """``slow`` ``--runs`` times; exits 1 if a table succeeded twice or a request failed."""
    failed = False
    for run in range(args.runs):
        agents = args.agents[0] if args.agents else 30
        figures = slow_once(agents, args.requests or 600, args.tables or 40, seed=run)
        print(f"run {run + 1}: " + ", ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
        twice = figures["written_twice"] or figures["records_twice"] or figures["double_writers"]
        failed |= bool(twice) or figures["succeeded"] != figures["requests"]
    if failed:
        raise SystemExit(1)


def _idle(agents: list[CountedAgent], poll: float, stale_after: float, polls: int) -> IdleCosts:
    """The idle polls of ``agents`` from two polls on, over ``stale_after`` and a poll at least
    (so every agent's window holds a sweep, once per ``stale_after`` without take_over) and
    ``polls`` polls each."""
    after = time.time() + 2 * poll
    window = after + stale_after + poll
    if not wait_until(
        lambda: (
            time.time() > window and all(len(idle_polls(agent, after)) >= polls for agent in agents)
        ),
        stale_after + (polls + 4) * poll + 60,
        0.2,
    ):
        raise SystemExit("the agents did not poll idle as often as asked")
    return IdleCosts.of(agents, after)


def creates_per_second(place: Place, count: int = 300, clients: int = 1) -> float:
    """The backend's raw rate of conditional creates, one after another from each client:
    one (in this process), or ``clients`` processes at once (their rates summed)."""
    url, options = place.environment(kept_folder("creates-"))
    if clients == 1:
        return _creates(url, options, count, "bench", time.time())
    start = time.time() + 2  # every client's imports done: all begin together
    jobs = [(url, options, count, f"bench-{n}", start) for n in range(clients)]
    spawn = multiprocessing.get_context("spawn")  # environment variables (credentials) go with it
    with spawn.Pool(clients) as pool:
        return sum(pool.starmap(_creates, jobs))


def _creates(url: str, options: dict[str, str], count: int, folder: str, start: float) -> float:
    storage = load_plugins().open_storage(url, options)
    time.sleep(max(start - time.time(), 0))
    started = time.perf_counter()
    for n in range(count):
        storage.create(f"{folder}/{n:05d}.json", b'{"n": %d}' % n)
    elapsed = time.perf_counter() - started
    storage.close()
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["drain", "schedule", "size", "slow"])
    parser.add_argument("--poll", type=float, nargs="+", default=[5.0, 0.01])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, help="default 300 (slow: 600)")
    parser.add_argument("--idle-samples", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--agents", type=int, nargs="+", help="fleet sizes (drain, schedule: one; default 3)"
    )
    parser.add_argument(
        "--tables", type=int, help="size, slow: the tables requests share (100; slow: 40)"
    )
    parser.add_argument("--idle-polls", type=int, default=6, help="size: idle polls per agent")
    parser.add_argument("--shrink-to", type=int, help="size: then stop all but this many")
    parser.add_argument("--azurite", action="store_true", help="on Azurite, not a local folder")
    parser.add_argument("--s3", action="store_true", help="on moto's S3 server (fdcore-s3)")
    args = parser.parse_args()
    if args.what == "slow":
        _slow(args)
        return
    args.requests = args.requests or 300
    args.tables = args.tables or 100
    with contextlib.ExitStack() as stack:
        place = Place()
        if args.azurite:
            place.azurite = stack.enter_context(Azurite())
            place.azurite.create_container(CONTAINER)
        elif args.s3:
            place.s3 = stack.enter_context(S3Emulator())
            place.s3.create_bucket(CONTAINER)
        print(f"conditional creates/s, one client: {creates_per_second(place):.0f}", flush=True)
        if args.what == "size":
            _size(args, place)
        else:
            _run(args, place)


def _size(args: argparse.Namespace, place: Place) -> None:
    """Each fleet size in turn at SIZE_SECTIONS; exits 1 if a check failed or an idle poll of
    one size made calls another did not."""
    failed = False
    measured: dict[str, IdleCosts] = {}
    for agents in args.agents or [3, 20]:
        figures = size_once(
            place,
            agents,
            args.requests,
            args.tables,
            SIZE_SECTIONS,
            args.idle_polls,
            args.shrink_to,
        )
        checked: Drained = figures.pop("checked")
        failed |= not checked.ok
        idle = {f"{agents} agents": figures.pop("idle")}
        if "idle_shrunk" in figures:
            idle[f"{args.shrink_to} of those {agents}"] = figures.pop("idle_shrunk")
        print(", ".join(f"{key}={value:.3g}" for key, value in figures.items()), flush=True)
        print(f"  checked: {checked}", flush=True)
        for label, costs in idle.items():
            print(f"  idle at {label}: {costs}", flush=True)
        measured.update(idle)
    shapes = {(costs.median, tuple(costs.most.items())) for costs in measured.values()}
    print(f"idle polls the same at every size: {len(shapes) == 1}")
    if failed or len(shapes) != 1:
        raise SystemExit(1)


def _run(args: argparse.Namespace, place: Place) -> None:
    """Each poll value in turn, ``--runs`` times; a drain also sets its requests/s against the
    one-client ceiling: the raw creates per second measured just before it over the writes the
    fleet made per request (its agents' own counts)."""
    results: dict[float, list[dict[str, float]]] = defaultdict(list)
    agents = args.agents[0] if args.agents else 3
    for run in range(args.runs):
        for poll in args.poll:
            if args.what == "drain":
                # measured again just before each drain: it moves with the machine, up to 2x
                # between invocations, and every share of it with it
                creates = creates_per_second(place)
                figures = drain_once(poll, args.requests, args.idle_samples, place, agents)
                ceiling = creates / figures["writes_per_request"]
                figures["creates_per_s"] = creates
                figures["ceiling_requests_per_s"] = ceiling
                figures["share_of_ceiling"] = figures["requests_per_s"] / ceiling
            else:
                figures = schedule_once(poll, args.seconds, place, agents)
            results[poll].append(figures)
            shown = ", ".join(f"{key}={value:.3g}" for key, value in figures.items())
            print(f"run {run + 1} poll_seconds={poll}: {shown}", flush=True)
    print("medians:")
    for poll, rows in results.items():
        medians = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"  poll_seconds={poll}: " + ", ".join(f"{k}={v:.3g}" for k, v in medians.items()))


if __name__ == "__main__":
    main()
