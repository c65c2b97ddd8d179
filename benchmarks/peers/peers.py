"""fdcore beside huey and APScheduler 4: the same workloads, interleaved, on this machine.

    .venv/bin/python benchmarks/peers/peers.py [drain] [size] [schedule] [takeover] [idle]
        [--systems fdcore huey aps-sqlite aps-postgres] [--runs 3] [--requests 100] ...

(``make bench-peers`` installs the ``peers`` extra and runs the defaults: one round of every
workload, several minutes; ``--runs 3`` for medians and ranges, and larger counts, scale it.)
Every system runs the same table, ``table.sh``: one short ``bash`` process that appends
"request table start end" to the run's log; a request is two tables, one after the other.
fdcore's agents run it through the command runner, huey's consumers and APScheduler's
schedulers from a task, ``peer_tasks.py``.
Duplicates are counted from that log: a (request, table) logged more than once ran twice.

- ``drain``: ``--processes`` worker processes (2 workers each) drain ``--requests`` queued
  requests. The workers start, settle, are stopped (SIGSTOP), the requests are queued, and they
  continue: wall is the first table's start to the last table's end; CPU per request is the
  worker processes' CPU over the drain (``/proc``'s schedstat, every thread) over the requests;
  machine CPU per request is every process's on the machine (``/proc/stat``) from the first
  table's start to the last one's end, over the requests: the tables, what starts them, the
  kernel's file work, and whatever else ran (a noisy neighbour counts too: compare medians).
  APScheduler on SQLite shares no events between processes (a scheduler never hears of a job
  another one added), so its requests are queued before its workers start, and the CPU its
  workers spent starting up on an empty store (measured first, in the same run) is subtracted.
- ``size``: the drain by fleet size (``--fleet 1 3 6`` processes), with ``--seconds 0.2`` tables
  and with zero-work tables (``--size-requests``).
- ``schedule``: 3 processes share a schedule every second for ``--schedule-seconds``: slots due,
  ran, missed, ran twice. huey's periodic tasks are crontabs, a minute at the finest: none.
- ``takeover``: 2 processes; a request with one 2 s table; when it starts, the process running
  it is SIGKILLed: seconds from the kill to the table's next start elsewhere (or never, within
  ``--takeover-timeout``), and whether it then ran twice. fdcore's agents take over with
  ``take_over = true``, ``stale_after = 15`` and ``grace_seconds = 10`` (off by default).
- ``idle``: 3 idle processes at the defaults: CPU as % of a core per process.

fdcore runs at its default settings but for ``concurrency = 2``; ``fdcore:claim=when_free``
names a variant with that claim policy, ``fdcore:poll=0.01`` one with that poll, and
``fdcore:before`` one running the code of the checkout ``--before`` names, or
``fdcore:before=PATH`` that of PATH (comma-separated: ``fdcore:before,claim=when_free``).
PostgreSQL is started from Debian's binaries (initdb, pg_ctl) in a temporary folder; without
them ``aps-postgres`` is skipped, saying so. Each run of each workload prints one JSON line
(``--out`` keeps them); the summary gives medians and ranges; ``--plot`` draws it (matplotlib).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from site import getsitepackages as site_packages
from typing import Any, Protocol

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_fleet import kept_folder  # noqa: E402
from wakeups import _cpu_and_wakeups, _tree  # noqa: E402

from fdcore.cli.fleet import AgentFleet, wait_until  # noqa: E402
from fdcore.mailbox.submit import submit  # noqa: E402

TABLE = ["bash", str(HERE / "table.sh")]
Request = tuple[str, list[str]]


class System(Protocol):
    """One system under test, running ``processes`` worker processes in ``folder``."""

    name: str
    #: Whether requests must be queued before the workers start (no events between processes).
    queue_first: bool

    def start(self, processes: int) -> list[int]: ...

    def submit(self, requests: list[Request]) -> None: ...

    def share_schedule(self) -> None: ...

    def take_over(self) -> None: ...

    def stop(self) -> None: ...


def _env(folder: Path, seconds: float) -> dict[str, str]:
    env = dict(os.environ)
    env["PEERS_LOG"] = str(folder / "tables.log")
    env["PEERS_SECONDS"] = f"{seconds:g}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    return env


class Fdcore:
    queue_first = False

    def __init__(
        self, folder: Path, seconds: float, variant: str = "", before: Path | None = None
    ) -> None:
        self.name = f"fdcore:{variant}" if variant else "fdcore"
        self.launcher: list[str] | None = None
        self.fleet = AgentFleet(folder, str(folder / "env"))
        self.fleet.env = _env(folder, seconds)
        self.sections: dict[str, Any] = {
            "agent": {"concurrency": 2},
            "runner": {"kind": "command", "command": TABLE},
        }
        for part in filter(None, variant.split(",")):
            key, _, value = part.partition("=")
            if key == "claim":
                self.sections["pipeline"] = {"claim": value}
            elif key == "poll":
                self.sections["agent"]["poll_seconds"] = float(value)
            elif key == "before" and (value or before is not None):
                checkout = Path(value) if value else before
                assert checkout is not None
                self.launcher = _checkout_launcher(self.fleet, checkout)
            else:
                raise SystemExit(f"--systems: no fdcore variant {part!r} (or no --before)")

    def start(self, processes: int) -> list[int]:
        for n in range(processes):
            agent = self.fleet.add(f"peer-{n}", self.sections)
            agent.launcher = self.launcher or agent.launcher
        return [agent.start().pid for agent in self.fleet]

    def submit(self, requests: list[Request]) -> None:
        for request, tables in requests:
            submit(self.fleet.mailbox, tables, request_id=request)

    def share_schedule(self) -> None:
        schedule = {"id": "tick", "shared": True, "entities": ["tick"], "every": "1s"}
        self.sections["schedules"] = [schedule]

    def take_over(self) -> None:
        """Takeover is off by default, and a lost agent is judged lost after stale_after plus
        the grace (60 + 60 s): on, with 15 s and 10 s (15 s is the least the 5 s poll allows)."""
        self.sections["pipeline"] = {**self.sections.get("pipeline", {}), "take_over": True}
        self.sections["pipeline"]["grace_seconds"] = 10
        self.sections["agent"] = {**self.sections["agent"], "stale_after": 15}

    def stop(self) -> None:
        self.fleet.stop_all()
        self.fleet.kill_all()


def _checkout_launcher(fleet: AgentFleet, checkout: Path) -> list[str]:
    """Agents that run the code of ``checkout`` (the core and every plugin of it): Python
    without ``site``, so this venv's editable installs (import hooks that win over
    ``PYTHONPATH``) do not load this checkout instead; its packages come from ``PYTHONPATH``,
    the third-party ones from this venv's site-packages."""
    distributions = sorted(checkout.glob("plugins/*/fdcore_*")) + sorted(
        checkout.glob("contrib/*/fdcore_*")
    )
    paths = [checkout, *(package.parent for package in distributions), *map(Path, site_packages())]
    fleet.env["PYTHONPATH"] = os.pathsep.join(str(path) for path in paths)
    return [sys.executable, "-S", "-m", "fdcore.cli"]


class _Workers:
    """Worker processes started from a command line each (huey's consumer, APScheduler's)."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.processes: list[subprocess.Popen[bytes]] = []

    def spawn(self, command: list[str]) -> int:
        with open(self.folder / f"worker-{len(self.processes)}.log", "ab") as log:
            process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process.pid

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)  # both stop gracefully on SIGINT
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Huey:
    name = "huey"
    queue_first = False

    def __init__(self, folder: Path, seconds: float) -> None:
        from peer_tasks import huey_app

        env = _env(folder, seconds)
        env["PEERS_HUEY_DB"] = str(folder / "huey.db")
        self.app, self.queued_request = huey_app(env["PEERS_HUEY_DB"])  # this process queues
        self.workers = _Workers(folder, env)

    def start(self, processes: int) -> list[int]:
        consumer = str(Path(sys.executable).parent / "huey_consumer")
        command = [consumer, "peer_tasks.huey", "-w", "2", "-k", "thread"]
        return [self.workers.spawn(command) for _ in range(processes)]

    def submit(self, requests: list[Request]) -> None:
        for request, tables in requests:
            self.queued_request(request, tables)

    def share_schedule(self) -> None:
        raise Unsupported("periodic tasks are crontabs: once a minute at the finest")

    def take_over(self) -> None:
        pass  # nothing to set: a task a killed consumer took is not run again

    def stop(self) -> None:
        self.workers.stop()


class Apscheduler:
    def __init__(self, folder: Path, seconds: float, url: str, name: str) -> None:
        self.name = name
        self.url = url
        self.queue_first = url.startswith("sqlite")
        self.workers = _Workers(folder, _env(folder, seconds))
        self._schedule = False

    def _scheduler(self) -> Any:
        from aps_worker import scheduler
        from apscheduler import SchedulerRole

        return scheduler(self.url, role=SchedulerRole.scheduler)

    def start(self, processes: int) -> list[int]:
        if self._schedule:
            from apscheduler import ConflictPolicy
            from apscheduler.triggers.interval import IntervalTrigger
            from peer_tasks import tick

            with self._scheduler() as producer:
                trigger = IntervalTrigger(seconds=1)
                producer.add_schedule(
                    tick,
                    trigger,
                    id="tick",
                    conflict_policy=ConflictPolicy.replace,
                    job_executor="threadpool",
                )
        command = [sys.executable, str(HERE / "aps_worker.py"), self.url, "2"]
        return [self.workers.spawn(command) for _ in range(processes)]

    def submit(self, requests: list[Request]) -> None:
        from peer_tasks import run_request

        with self._scheduler() as producer:
            for request, tables in requests:
                producer.add_job(run_request, args=[request, tables], job_executor="threadpool")

    def share_schedule(self) -> None:
        self._schedule = True

    def take_over(self) -> None:
        pass  # a job's lease (30 s by default) runs out; then it is reaped as abandoned

    def stop(self) -> None:
        self.workers.stop()


class Unsupported(Exception):
    """A workload the system has no way to run."""


class Postgres:
    """A PostgreSQL server of Debian's binaries in a temporary folder, on a Unix socket only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.bin = _postgres_bin()
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", self.user, "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True)

    def __enter__(self) -> Postgres:
        self.folder.mkdir(parents=True)
        shutil.chown(self.folder, self.user)
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", self.user)
        options = f"-k {self.folder} -c listen_addresses='' -c fsync=on -c max_connections=200"
        log = str(self.folder / "log")
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-l", log, "-w", "start"
        )
        return self

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@/{database}?host={self.folder}"

    def create(self, database: str) -> str:
        self._run(str(self.bin / "createdb"), "-h", str(self.folder), "-U", self.user, database)
        return self.url(database)

    def __exit__(self, *exc: object) -> None:
        data = str(self.folder / "data")
        self._run(str(self.bin / "pg_ctl"), "-D", data, "-m", "immediate", "stop")


def _postgres_bin() -> Path:
    """Debian's PostgreSQL server binaries (postgresql-NN), newest first; KeyError if none."""
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / "initdb").exists():
            return folder
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise KeyError("no PostgreSQL server binaries (Debian: apt-get install postgresql)")


# -- the tables' log ----------------------------------------------------------------------------


def table_runs(folder: Path) -> list[tuple[str, str, float, float]]:
    """Every table run logged: (request, table, start, end); a torn last line is left out."""
    path = folder / "tables.log"
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 4:
            runs.append((fields[0], fields[1], float(fields[2]), float(fields[3])))
    return runs


def ran_twice(runs: list[tuple[str, str, float, float]]) -> int:
    """Table runs beyond the first of each (request, table)."""
    return sum(n - 1 for n in Counter((run[0], run[1]) for run in runs).values())


# -- workloads ----------------------------------------------------------------------------------


class Bench:
    """The workloads. Each run's folder is kept until the benchmark exits (``kept_folder``):
    a run must not pay for the removal of the last one's files."""

    def __init__(self, args: argparse.Namespace, postgres: Postgres | None) -> None:
        self.args = args
        self.postgres = postgres
        self.count = 0

    @contextlib.contextmanager
    def system(self, name: str, seconds: float) -> Iterator[tuple[System, Path]]:
        self.count += 1
        folder = kept_folder(f"{self.count:03d}-{name.replace(':', '-')}-")
        system: System
        kind, _, variant = name.partition(":")
        if kind == "fdcore":
            system = Fdcore(folder, seconds, variant, self.args.before)
        elif kind == "huey":
            system = Huey(folder, seconds)
        elif kind == "aps-sqlite":
            system = Apscheduler(folder, seconds, f"sqlite+aiosqlite:///{folder}/aps.db", name)
        elif kind == "aps-postgres":
            if self.postgres is None:
                raise Unsupported("no PostgreSQL server")
            url = self.postgres.create(f"peers{self.count}")
            system = Apscheduler(folder, seconds, url, name)
        else:
            raise SystemExit(f"--systems: no system {name!r}")
        try:
            yield system, folder
        finally:
            system.stop()

    def drain(self, name: str, processes: int, requests: int, seconds: float) -> dict[str, Any]:
        # Tables of their own: fdcore runs no table twice at once (its table leases), so two
        # requests naming one table would wait for each other, and the peers' would not.
        queued = [(f"r{n:05d}", [f"t{n}-a", f"t{n}-b"]) for n in range(requests)]
        startup = 0.0
        if name.startswith("aps-sqlite"):
            with self.system(name, seconds) as (system, _):
                pids = system.start(processes)
                time.sleep(self.args.settle)
                startup = _cpu(pids)
        with self.system(name, seconds) as (system, folder):
            if system.queue_first:
                system.submit(queued)
                pids = system.start(processes)
                before = startup
            else:
                pids = system.start(processes)
                time.sleep(self.args.settle)  # start-up: imports, first polls
                _signal_trees(pids, signal.SIGSTOP)
                system.submit(queued)
                before = _cpu(pids)
                _signal_trees(pids, signal.SIGCONT)
            expected = {(request, table) for request, tables in queued for table in tables}
            machine = [(time.time(), machine_cpu())]

            def drained() -> bool:
                machine.append((time.time(), machine_cpu()))
                return {(run[0], run[1]) for run in table_runs(folder)} >= expected

            done = wait_until(drained, self.args.timeout, 0.05)
            machine.append((time.time(), machine_cpu()))
            time.sleep(0.5)  # a duplicate still running would be logged by now
            cpu = _cpu(pids) - before
            runs = table_runs(folder)
        if not done:
            return {"error": f"{len({(r[0], r[1]) for r in runs})} of {len(expected)} tables ran"}
        first, last = min(run[2] for run in runs), max(run[3] for run in runs)
        span = last - first
        busy = cpu_at(machine, last) - cpu_at(machine, first)
        return {
            "wall_s": span,
            "requests_per_s": requests / span,
            "cpu_ms_per_request": 1000 * cpu / requests,
            "machine_cpu_ms_per_request": 1000 * busy / requests,
            "ran_twice": ran_twice(runs),
        }

    def schedule(self, name: str) -> dict[str, Any]:
        with self.system(name, 0) as (system, folder):
            system.share_schedule()
            system.start(3)
            time.sleep(self.args.settle)
            window_start = time.time()
            time.sleep(self.args.schedule_seconds)
            window_end = time.time()
            time.sleep(3)  # the window's last slots end
            runs = table_runs(folder)
        slots = Counter(round(float(_slot(run[0]))) for run in runs)
        due = range(int(window_start) + 1, int(window_end) + 1)
        return {
            "due": len(due),
            "ran": sum(1 for slot in due if slots[slot] >= 1),
            "missed": sum(1 for slot in due if slots[slot] == 0),
            "ran_twice": sum(slots[slot] - 1 for slot in due if slots[slot] > 1),
        }

    def takeover(self, name: str) -> dict[str, Any]:
        with self.system(name, 2) as (system, folder):
            system.take_over()
            pids = system.start(2)
            time.sleep(self.args.settle)
            system.submit([("victim", ["a"])])
            started = folder / "tables.log.started"
            if not wait_until(started.exists, 60, 0.02):
                return {"error": "the table never started"}
            time.sleep(0.1)
            parent = int(started.read_text().split()[3])
            victim = next(pid for pid in pids if parent in _tree(pid))
            os.kill(victim, signal.SIGKILL)
            killed = time.time()

            def restarted() -> bool:
                return len(started.read_text().splitlines()) > 1

            again = wait_until(restarted, self.args.takeover_timeout, 0.05)
            time.sleep(3 if again else 0)  # the second run ends
            starts = [float(line.split()[2]) for line in started.read_text().splitlines()]
            runs = table_runs(folder)
        return {
            "taken_over_s": starts[1] - killed if again else None,
            "ran_twice": ran_twice(runs),
        }

    def idle(self, name: str) -> dict[str, Any]:
        with self.system(name, 0) as (system, _):
            pids = system.start(3)
            time.sleep(self.args.settle + 5)
            before = _cpu(pids)
            began = time.monotonic()
            time.sleep(self.args.idle_seconds)
            cpu = _cpu(pids) - before
            elapsed = time.monotonic() - began
        return {"cpu_percent_per_process": 100 * cpu / elapsed / len(pids)}


def _slot(request: str) -> str:
    """A schedule run's slot, as epoch seconds: fdcore's slot ids hold the due second
    (``tick-tick-1796421845``), the peers' requests are ``tick-<second>``."""
    return request.rsplit("-", 1)[1]


def _cpu(pids: list[int]) -> float:
    return sum(_cpu_and_wakeups(pid)[0] for pid in pids)


def machine_cpu() -> float:
    """Seconds of CPU every process of the machine spent so far (``/proc/stat``: all but idle
    and I/O wait), tables, the processes that start them and the kernel's work included."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]  # less idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def cpu_at(samples: list[tuple[float, float]], when: float) -> float:
    """The machine's CPU at ``when``, between the two (time, CPU) samples around it, in line."""
    before = max((s for s in samples if s[0] <= when), default=samples[0])
    after = min((s for s in samples if s[0] >= when), default=samples[-1])
    if after[0] <= before[0]:
        return before[1]
    return before[1] + (after[1] - before[1]) * (when - before[0]) / (after[0] - before[0])


def _signal_trees(pids: list[int], signum: int) -> None:
    for pid in pids:
        for process in _tree(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process, signum)


# -- running and reporting ----------------------------------------------------------------------


def cases(args: argparse.Namespace) -> list[tuple[str, str, dict[str, Any]]]:
    """(workload, system, parameters) of one round, in the order they run."""
    found = []
    for workload in args.workloads:
        for system in args.systems:
            if workload == "drain":
                parameters = {"processes": args.processes, "requests": args.requests, "seconds": 0}
                found.append((workload, system, parameters))
            elif workload == "size":
                for seconds in args.seconds:
                    for processes in args.fleet:
                        parameters = {
                            "processes": processes,
                            "requests": args.size_requests * processes,
                            "seconds": seconds,
                        }
                        found.append((workload, system, parameters))
            else:
                found.append((workload, system, {}))
    return found


def run(bench: Bench, workload: str, system: str, parameters: dict[str, Any]) -> dict[str, Any]:
    try:
        if workload in ("drain", "size"):
            return bench.drain(system, **parameters)
        result: dict[str, Any] = getattr(bench, workload)(system)
        return result
    except Unsupported as reason:
        return {"unsupported": str(reason)}


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Medians (and ranges) of each case's figures over its runs, a line each."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        key = f"{result['workload']:8} {result['system']:16} {json.dumps(result['parameters'])}"
        groups.setdefault(key, []).append(result["figures"])
    lines = []
    for key, runs in groups.items():
        parts = []
        for field in sorted({f for run in runs for f in run}):
            values = [run[field] for run in runs if field in run]
            numbers = [v for v in values if isinstance(v, int | float)]
            if len(numbers) == len(values) and numbers:
                low, high = min(numbers), max(numbers)
                parts.append(f"{field} {statistics.median(numbers):.3g} ({low:.3g}-{high:.3g})")
            else:
                parts.append(f"{field} {values[0]}")
        lines.append(f"{key}  " + "; ".join(parts))
    return lines


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Requests/s by fleet size, a line per system and table length (the ``size`` runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[str, dict[int, list[float]]] = {}
    for result in results:
        if result["workload"] != "size" or "requests_per_s" not in result["figures"]:
            continue
        parameters = result["parameters"]
        label = f"{result['system']}, {parameters['seconds']:g} s tables"
        by_size = lines.setdefault(label, {})
        by_size.setdefault(parameters["processes"], []).append(result["figures"]["requests_per_s"])
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, by_size in sorted(lines.items()):
        sizes = sorted(by_size)
        axes.plot(sizes, [statistics.median(by_size[n]) for n in sizes], marker="o", label=label)
    axes.set_xlabel("worker processes (2 workers each)")
    axes.set_ylabel("requests/s (median)")
    axes.set_yscale("log")
    axes.set_title("Throughput by fleet size, side by side")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    workloads = ["drain", "size", "schedule", "takeover", "idle"]
    parser.add_argument("workloads", nargs="*", help=f"any of {', '.join(workloads)} (all)")
    parser.add_argument(
        "--systems", nargs="+", default=["fdcore", "huey", "aps-sqlite", "aps-postgres"]
    )
    parser.add_argument("--runs", type=int, default=1, help="interleaved rounds (1; 3 for medians)")
    parser.add_argument("--requests", type=int, default=100, help="drain's requests")
    parser.add_argument("--processes", type=int, default=3, help="drain's worker processes")
    parser.add_argument("--fleet", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.2, 0])
    parser.add_argument("--size-requests", type=int, default=5, help="per worker process")
    parser.add_argument("--schedule-seconds", type=float, default=10)
    parser.add_argument("--takeover-timeout", type=float, default=60)
    parser.add_argument("--idle-seconds", type=float, default=10)
    parser.add_argument("--settle", type=float, default=4, help="start-up seconds")
    parser.add_argument("--timeout", type=float, default=600, help="a drain's longest wait")
    parser.add_argument("--before", type=Path, help="a checkout for fdcore:before")
    parser.add_argument("--out", type=Path, help="append each run's JSON line to this file")
    parser.add_argument("--plot", type=Path, help="draw the size runs here (PNG)")
    args = parser.parse_args(argv)
    args.workloads = args.workloads or workloads
    for workload in set(args.workloads) - set(workloads):
        parser.error(f"no workload {workload!r}; the workloads: {', '.join(workloads)}")
    # SIGTERM stops the systems on the way out, as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        results = _run_all(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print("\n".join(summary(results)))
    if args.plot:
        plot(results, args.plot)
    return 0


def _run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every round of every case, printed (and kept in ``--out``) as it ends."""
    print(f"load average {os.getloadavg()}", flush=True)
    results = []
    with contextlib.ExitStack() as stack:
        postgres = None
        if "aps-postgres" in args.systems:
            try:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                folder.chmod(0o755)  # the server's own user reaches its folder through it
                postgres = stack.enter_context(Postgres(folder / "pg"))
            except (KeyError, subprocess.CalledProcessError) as reason:
                print(f"aps-postgres: skipped ({reason})", flush=True)
                args.systems.remove("aps-postgres")
        bench = Bench(args, postgres)
        for round_ in range(args.runs):
            for workload, system, parameters in cases(args):
                figures = run(bench, workload, system, parameters)
                result = {
                    "round": round_,
                    "workload": workload,
                    "system": system,
                    "parameters": parameters,
                    "figures": figures,
                    "load": os.getloadavg()[0],
                }
                results.append(result)
                print(json.dumps(result), flush=True)
                if args.out:
                    with open(args.out, "a") as out:
                        out.write(json.dumps(result) + "\n")
    return results


if __name__ == "__main__":
    sys.exit(main())
