"""Table processes that never outlive the agent that started them.

A table process left running by a dead agent is a second writer: the agent restarting under the
same name (or another agent, once the lease runs out) starts the table again beside it. So each
table process

* leads its own process group, so the agent can end it with everything it started;
* gets ``SIGKILL`` from the kernel the moment the agent dies (``PR_SET_PDEATHSIG``, Linux), and
  exits at once if the agent died before that signal was armed;
* is recorded, by pid and start time, in a folder of this machine that belongs to the agent's
  name and environment, so the agent's next instance ends whatever group is left (children the
  table process started survive its death signal) before it starts any table.

Where util-linux's ``setpriv`` is installed, the death signal is armed by it (``setpriv
--pdeathsig KILL``), and a shell it execs checks that the agent is still its parent before it
execs the table's command: the agent then starts the process with a plain ``vfork`` and
``exec`` (a sixth of the agent's CPU a ``fork`` running Python code in the child takes).
Elsewhere the child arms the signal itself, in a ``preexec_fn``.

A recorded pid whose process now has another start time was reused by an unrelated process and is
left alone. A process group keeps its number while any member lives, so a group whose leader is
gone is still the table's.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("fdcore.runner")

_PR_SET_PDEATHSIG = 1
#: Where the records live; a folder in the temporary directory clears on reboot, with the
#: processes it names. Tests point it elsewhere.
STATE_VARIABLE = "FDCORE_RUNNER_STATE"


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces and parentheses, so count from ')'.
    return int(stat.rpartition(")")[2].split()[19])


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, for prctl (Linux only): looked up once, since ``find_library`` runs
    ``ldconfig -p`` in a process of its own each time."""
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) if _linux() else None


def child_setup() -> Callable[[], None]:
    """The ``preexec_fn`` of a table process where ``setpriv`` is not: its own session, and
    death with its parent. Other threads run in the agent (run waiters, the watcher, incidents):
    the child runs only setsid, a prctl whose function was looked up before the fork, getppid
    and _exit, and takes no lock another thread could hold at the fork."""
    parent = os.getpid()
    libc = _libc()

    def setup() -> None:
        os.setsid()
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the agent died before the signal was armed
                os._exit(1)

    return setup


#: What the shell between ``setpriv`` and the table's command runs: its first argument is the
#: agent's pid; a different parent means the agent died before the signal was armed.
_GUARD = 'if [ "$PPID" != "$1" ]; then exit 1; fi; shift; exec "$@"'
SHELL = "/bin/sh"


@functools.cache
def _setpriv() -> str | None:
    """util-linux's ``setpriv``, if it arms a death signal (``--pdeathsig``, since 2.33)."""
    found = shutil.which("setpriv") if _linux() else None
    if found is None or not os.access(SHELL, os.X_OK):
        return None
    try:
        shown = subprocess.run([found, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if "--pdeathsig" in shown.stdout else None


def table_process(
    command: Sequence[str], env: Mapping[str, str], cwd: str | None
) -> tuple[list[str], dict[str, Any]]:
    """The argv and the ``Popen`` options that start ``command`` as a table process: its own
    session, and death with this process. A missing program is FileNotFoundError here, as
    ``Popen`` raises it, though the program ``Popen`` runs is ``setpriv``."""
    setpriv = _setpriv()
    if setpriv is None:
        return list(command), {"preexec_fn": child_setup()}
    _check_found(command[0], env, cwd)
    guard = [setpriv, "--pdeathsig", "KILL", "--", SHELL, "-c", _GUARD, "sh", str(os.getpid())]
    return [*guard, *command], {"start_new_session": True}


def _check_found(program: str, env: Mapping[str, str], cwd: str | None) -> None:
    if os.sep in program:
        found = os.path.exists(os.path.join(cwd or "", program))
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def exited(pid: int) -> bool:
    """Whether child ``pid`` has exited; it is left unreaped, so its number stays taken."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # reaped already


def end_group(pid: int, signum: int = signal.SIGKILL) -> None:
    """Signal the process group ``pid`` leads; nothing if it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


class ProcessRecords:
    """The table processes one agent (by name, on one environment) has running on this machine."""

    def __init__(self, agent: str, environment: str, root: Path | None = None) -> None:
        digest = hashlib.sha256(f"{environment}\n{agent}".encode()).hexdigest()[:16]
        self.folder = (root or state_root()) / f"{agent}-{digest}"

    def add(self, pid: int) -> None:
        record = json.dumps({"pid": pid, "start_time": start_time(pid)})
        path = self.folder / f"{pid}.json"
        try:
            path.write_text(record)
        except FileNotFoundError:  # the first record, or a cleaner of the temporary folder ran
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_text(record)

    def remove(self, pid: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / f"{pid}.json").unlink()

    def end_leftovers(self) -> int:
        """End the groups an earlier instance of this agent left running; return how many."""
        ended = 0
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                record = json.loads(path.read_text())
                pid, started = int(record["pid"]), record["start_time"]
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            now = start_time(pid)
            if now is None or now == started:
                if now is not None or _group_exists(pid):
                    log.warning("ending table process group %d left by a previous run", pid)
                    ended += 1
                end_group(pid)
            path.unlink(missing_ok=True)
        return ended


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _linux() -> bool:
    return sys.platform.startswith("linux")


def state_root() -> Path:
    """The folder of every agent's records on this machine (``FDCORE_RUNNER_STATE``, else one
    in the temporary folder, per user)."""
    given = os.environ.get(STATE_VARIABLE)
    if given:
        return Path(given)
    return Path(tempfile.gettempdir()) / f"fdcore-{os.getuid()}" / "table-processes"
