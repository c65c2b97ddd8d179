"""Whether the process that wrote a lease still runs: its pid, the boot and the process's start.

A pid alone can be reused, after a reboot or once the kernel wraps around; the boot id and the
start time (in clock ticks since boot, from ``/proc/<pid>/stat``) tell a reused pid from the
holder. Where ``/proc`` is missing the answer is None (unknown), and the lease time alone decides.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@attrs.frozen
class Holder:
    """What a lease records of the process that holds it."""

    pid: int
    boot_id: str | None
    start: int | None  # the process's start time in ticks since boot


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text()[:64].strip() or None
    except OSError:
        return None


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()[:4096]
    except OSError:
        return None
    # the command name is in parentheses and may itself hold spaces or parentheses
    return text.rpartition(")")[2].split()


def this_process() -> Holder:
    pid = os.getpid()
    fields = _stat(pid)
    start = int(fields[19]) if fields and len(fields) > 19 else None
    return Holder(pid, boot_id(), start)


def is_alive(holder: Holder) -> bool | None:
    """True if the holder runs, False if it surely does not, None if this host cannot tell."""
    current_boot = boot_id()
    if holder.boot_id and current_boot and holder.boot_id != current_boot:
        return False  # the machine restarted since: every process of that boot is gone
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    fields = _stat(holder.pid)
    if fields is None:
        return None if current_boot is None else False
    if fields[0] in ("Z", "X"):
        return False  # exited, not yet reaped by its parent
    # a start time that differs: the pid now names another process
    return holder.start is None or len(fields) <= 19 or int(fields[19]) == holder.start
