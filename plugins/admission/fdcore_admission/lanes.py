"""Lanes: one lock file per lane, held with ``flock`` through an open descriptor.

An ``flock`` belongs to the open file description, not to a process: every descriptor that
shares it (inherited, duplicated, or passed over a Unix socket) holds the same lock, and the lane
is free only once the last of them is closed. That is what lets a lane move between processes
without a gap.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from fdcore_admission.errors import AdmissionRefused

LANE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class Lanes:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder) / "lanes"

    def path(self, lane: str) -> Path:
        if not isinstance(lane, str) or not LANE_NAME.fullmatch(lane):
            raise AdmissionRefused("ADMISSION_LANE_INVALID", f"lane {lane!r}: not a lane name")
        return self.folder / f"{lane}.lock"

    def open(self, lane: str) -> int:
        """A new, non-inheritable descriptor on the lane's lock file (not yet holding it)."""
        path = self.path(lane)
        self.folder.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def try_hold(self, lane: str) -> int | None:
        """A descriptor holding the lane, or None while another holds it. Never blocks."""
        fd = self.open(lane)
        if hold(fd):
            return fd
        os.close(fd)
        return None

    def is_free(self, lane: str) -> bool:
        """Whether nobody holds the lane now (tried, and let go at once). Never blocks."""
        fd = self.try_hold(lane)
        if fd is None:
            return False
        os.close(fd)
        return True

    def is_lane(self, fd: int, lane: str) -> bool:
        """Whether ``fd`` is open on the lane's lock file itself (same device and inode)."""
        try:
            theirs, ours = os.fstat(fd), os.stat(self.path(lane))
        except OSError:
            return False
        return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def hold(fd: int) -> bool:
    """Take (or keep) the lock through ``fd`` without blocking; False if another holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
