"""What starting one table process costs the machine, by the way it is started.

    .venv/bin/python benchmarks/bench_spawn.py [--starts 300] [--rounds 3] [--command /bin/true]

The command runner starts each table so that it can never outlive its agent
(fdcore.builtin.processes): util-linux's ``setpriv --pdeathsig KILL`` and a ``/bin/sh`` guard
that checks the agent is still its parent, then the table's command, from a plain
``vfork``/``exec``. Beside it, the ways it could be started instead, each ``--starts`` times in
turn (interleaved rounds, medians), all waiting for the process to end:

- ``plain``: ``vfork``/``exec`` of the command in its own session, no death signal: the floor,
  and not safe (a table left by a killed agent runs on beside the next one's);
- ``fdcore``: what the command runner does (``table_process``);
- ``preexec``: ``Popen`` with a ``preexec_fn`` arming the death signal, from a process the size
  of an agent (fdcore's agent modules imported): Python's ``fork`` where ``vfork`` cannot be;
- ``helper``: a small Python process, started once, forks each table itself and arms the death
  signal in the child (a "zygote"); the agent asks it over a pipe.

Each figure is the machine's CPU per start (``/proc/stat``: every process, the kernel
included, so the helper's and the guard's processes count) and the wall time per start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from peers.peers import machine_cpu

import fdcore.agent.core
import fdcore.cli.runtime  # noqa: F401
from fdcore.builtin.processes import child_setup, table_process

#: The helper: reads one command a line (NUL-separated arguments), forks it with the death
#: signal armed in the child, answers its exit status.
HELPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
for line in sys.stdin.buffer:
    argv = line.rstrip(b"\n").split(b"\0")
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
            if os.getppid() != me:
                os._exit(1)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
    sys.stdout.flush()
"""


def _popen(argv: list[str], options: dict[str, object]) -> None:
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **options,  # type: ignore[call-overload]
    )
    process.communicate()


def starters(command: list[str]) -> tuple[dict[str, Callable[[], None]], subprocess.Popen[str]]:
    """Each way of starting ``command`` once and waiting for it; and the helper process."""
    helper = subprocess.Popen(
        [sys.executable, "-S", "-c", HELPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=child_setup(),  # once: the helper dies with this process
    )
    assert helper.stdin is not None and helper.stdout is not None
    request = "\0".join(command) + "\n"

    def by_helper() -> None:
        assert helper.stdin is not None and helper.stdout is not None
        helper.stdin.write(request)
        helper.stdin.flush()
        helper.stdout.readline()

    def fdcore() -> None:
        _popen(*table_process(command, os.environ, None))

    return {
        "plain": lambda: _popen(command, {"start_new_session": True}),
        "fdcore": fdcore,
        "preexec": lambda: _popen(command, {"preexec_fn": child_setup()}),
        "helper": by_helper,
    }, helper


def measure(start: Callable[[], None], starts: int) -> tuple[float, float]:
    """Machine CPU ms and wall ms per start, over ``starts`` starts."""
    cpu, wall = machine_cpu(), time.perf_counter()
    for _ in range(starts):
        start()
    return (
        1000 * (machine_cpu() - cpu) / starts,
        1000 * (time.perf_counter() - wall) / starts,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--command", nargs="+", default=["/bin/true"])
    args = parser.parse_args(argv)
    ways, helper = starters(args.command)
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    try:
        for _ in range(args.rounds):
            for name, start in ways.items():
                figures[name].append(measure(start, args.starts))
    finally:
        helper.kill()
        helper.wait()
    print(f"{'start':8} {'machine CPU ms':>15} {'wall ms':>8}  (medians of {args.rounds})")
    for name, runs in figures.items():
        cpu = statistics.median(run[0] for run in runs)
        wall = statistics.median(run[1] for run in runs)
        print(f"{name:8} {cpu:15.2f} {wall:8.2f}")


if __name__ == "__main__":
    main()
