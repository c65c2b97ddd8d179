"""What changed in a folder since a cursor, told by inotify (``ListingChanges``).

An agent lists ``requests/`` and ``status/`` at every look. Listed whole, a look costs a
``stat`` of every file in them, so a queue of N requests costs each look N stats. Here a folder
is listed whole once, with an inotify watch armed before that listing; later calls read the
events the kernel queued since (a non-blocking read in the caller: no thread) and the store
looks only at the names they concern. The kernel queues an event before the write's own call
returns, so a write that landed before a call is in that call's answer: the changes, taken into
the earlier listing, give the listing a whole one would give then.

A cursor is answered with a whole listing instead (a new base) when the watch cannot tell:

- off Linux, or with no inotify instance to be had (``fs.inotify.max_user_instances``);
- on a file system another machine may write (NFS, SMB, FUSE: inotify sees this kernel's writes
  only), so only the local file systems of ``LOCAL_FILE_SYSTEMS`` are followed;
- a folder that holds folders (a watch does not see into them), or is missing;
- the kernel's queue overflowed, the folder went (pruned, renamed), or the cursor is older than
  the log keeps;
- ``RELIST_SECONDS`` after the cursor's whole listing: a bound on what any miss could cost.

One inotify instance serves every store of a process; a forked child makes its own.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

import attrs

from fdcore_localfs.watch import (
    EVENT,
    FOLDER_GONE,
    IN_CLOEXEC,
    IN_CREATE,
    IN_DELETE,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_NONBLOCK,
    IN_ONLYDIR,
    _libc,
)

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004  # a ``touch`` moves the modification time, which the etag holds
IN_CLOSE_WRITE = 0x00000008
IN_Q_OVERFLOW = 0x00004000
IN_ISDIR = 0x40000000
FOLDER_EVENTS = (
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE
)

RELIST_SECONDS = 60.0
FOLLOWED_BOUND = 256  # folders a process follows at most (a watch each); others list whole
LOG_BOUND = 100_000  # names a folder's log keeps; a cursor behind them lists whole

# statfs(2) f_type of the file systems whose writes all pass through this kernel.
LOCAL_FILE_SYSTEMS = frozenset(
    {
        0xEF53,  # ext2, ext3, ext4
        0x58465342,  # xfs
        0x9123683E,  # btrfs
        0x01021994,  # tmpfs
        0x858458F6,  # ramfs
        0x794C7630,  # overlayfs (containers)
        0x2FC12FC1,  # zfs
        0xF2F52010,  # f2fs
    }
)


@attrs.define
class _Followed:
    """One watched folder: the names its events concerned, in order."""

    path: str
    wd: int
    generation: int
    log: list[str] = attrs.Factory(list)
    start: int = 0  # the position of log[0]
    live: bool = True  # False once the watch ended (the folder went) or the queue overflowed

    @property
    def end(self) -> int:
        return self.start + len(self.log)


@attrs.frozen
class Cursor:
    """Where a reader of a folder stands (opaque to it)."""

    owner: object
    path: str
    generation: int
    position: int
    listed_at: float  # monotonic time of the whole listing this follows


class FolderChanges:
    """The process's inotify instance and the folders it follows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = os.getpid()
        self._by_path: dict[str, _Followed] = {}
        self._by_wd: dict[int, _Followed] = {}
        self._generations = 0
        self._local: dict[int, bool] = {}  # st_dev -> whether the file system is local

    def since(self, folder: Path, cursor: object | None) -> tuple[list[str] | None, Cursor | None]:
        """The names in ``folder`` changed since ``cursor``, and the cursor to pass next.
        None instead of the names: list the folder whole; the cursor returned (None: the next
        call lists whole too) was taken before that listing, so what changes during it is in
        the next answer."""
        path = str(folder)
        with self._lock:
            if os.getpid() != self._pid:  # a forked child: never read the parent's queue
                self._reset()
            self._drain()
            followed = self._by_path.get(path)
            if (
                isinstance(cursor, Cursor)
                and cursor.owner is self
                and followed is not None
                and followed.live
                and cursor.path == path
                and cursor.generation == followed.generation
                and followed.start <= cursor.position <= followed.end
                and time.monotonic() - cursor.listed_at < RELIST_SECONDS
            ):
                names = followed.log[cursor.position - followed.start :]
                return names, attrs.evolve(cursor, position=followed.end)
            followed = self._follow(folder)
            if followed is None:
                return None, None
            return None, Cursor(self, path, followed.generation, followed.end, time.monotonic())

    def _follow(self, folder: Path) -> _Followed | None:
        """The folder watched (armed now if it was not), or None where it cannot be."""
        path = str(folder)
        known = self._by_path.get(path)
        if known is not None and known.live:
            return known if _flat(folder) else None
        if known is not None:
            self._forget(known)
        if len(self._by_path) >= FOLLOWED_BOUND:
            for gone in [one for one in self._by_path.values() if not one.live]:
                self._forget(gone)
            if len(self._by_path) >= FOLLOWED_BOUND:
                return None
        fd = self._instance()
        if fd is None or not self._is_local(folder):
            return None
        libc = _libc()
        assert libc is not None  # an instance was had
        mask = FOLDER_EVENTS | FOLDER_GONE | IN_ONLYDIR
        wd = libc.inotify_add_watch(fd, os.fsencode(path), mask)
        if wd < 0:
            return None  # missing (no key yet, or pruned), or out of watches: list whole
        # Armed before the check: a folder made inside it from now on is an event.
        if not _flat(folder):
            libc.inotify_rm_watch(fd, wd)
            return None
        self._generations += 1
        followed = _Followed(path, wd, self._generations)
        stale = self._by_wd.pop(wd, None)  # the same folder under another name
        if stale is not None:
            self._by_path.pop(stale.path, None)
        self._by_path[path] = self._by_wd[wd] = followed
        return followed

    def release(self, root: Path) -> None:
        """Stop following the folders under ``root`` (a store of it closed; another store of
        the same root lists whole once, then follows them again)."""
        under = os.path.join(str(root), "")
        with self._lock:
            if os.getpid() != self._pid:
                return  # a forked child's copy: nothing of it is this process's
            for followed in [f for path, f in self._by_path.items() if path.startswith(under)]:
                self._forget(followed)

    def _forget(self, followed: _Followed) -> None:
        self._by_path.pop(followed.path, None)
        if self._by_wd.get(followed.wd) is followed:
            del self._by_wd[followed.wd]
            libc = _libc()
            if followed.live and self._fd is not None and libc is not None:
                libc.inotify_rm_watch(self._fd, followed.wd)

    def _instance(self) -> int | None:
        libc = _libc()  # looked up at the first listing, not when the plugin is imported
        if self._fd is None and libc is not None:
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                return None  # out of instances: list whole, and try again at the next call
            self._fd = fd
        return self._fd

    def _is_local(self, folder: Path) -> bool:
        try:
            device = os.stat(folder).st_dev
        except OSError:
            return False
        if device not in self._local:
            self._local[device] = _file_system_type(folder) in LOCAL_FILE_SYSTEMS
        return self._local[device]

    def _drain(self) -> None:
        """Take every event queued so far into the folders' logs."""
        if self._fd is None:
            return
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return
            except OSError:
                self._reset()  # an unusable instance: start over, whole listings
                return
            self.take(data)

    def take(self, data: bytes) -> None:
        """Take one read's events into the folders' logs."""
        offset = 0
        while offset + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            offset += EVENT.size
            name = os.fsdecode(data[offset : offset + length].rstrip(b"\0"))
            offset += length
            if mask & IN_Q_OVERFLOW:  # events were lost: every folder is listed whole again
                for each in self._by_path.values():
                    each.live = False
                continue
            followed = self._by_wd.get(wd)
            if followed is None:
                continue
            if mask & FOLDER_GONE or (mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO)):
                followed.live = False  # gone, or no longer flat: list whole and arm again
                continue
            if name:
                followed.log.append(name)
            if len(followed.log) > LOG_BOUND:
                half = len(followed.log) // 2
                followed.start += half
                del followed.log[:half]

    def _reset(self) -> None:
        if self._fd is not None and os.getpid() == self._pid:
            os.close(self._fd)
        self._fd = None
        self._pid = os.getpid()
        self._by_path.clear()
        self._by_wd.clear()


def _flat(folder: Path) -> bool:
    """Whether ``folder`` holds no folder (dot names aside: never keys)."""
    try:
        with os.scandir(folder) as entries:
            return not any(
                e.is_dir(follow_symlinks=False) and not e.name.startswith(".") for e in entries
            )
    except OSError:
        return False


class _StatFs(ctypes.Structure):
    # Only the first field is read; the rest is room for the kernel to fill.
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 256)]


def _file_system_type(folder: Path) -> int | None:
    """statfs(2)'s ``f_type`` of the file system holding ``folder``; None if unknown."""
    libc = _libc()
    if libc is None or not hasattr(libc, "statfs"):
        return None
    found = _StatFs()
    if libc.statfs(os.fsencode(str(folder)), ctypes.byref(found)) != 0:
        return None
    return int(found.f_type) & 0xFFFFFFFF


CHANGES = FolderChanges()  # one per process: one inotify instance, whatever the stores
