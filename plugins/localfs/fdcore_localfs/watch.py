"""Telling an agent at once that a key appeared under a prefix: inotify.

The folder of the prefix (``requests/``, ``leases/``) may not exist yet, and a delete that empties
it prunes it (see ``LocalFolderStorage._prune``): while it is missing the root is watched, until
it comes back. Scratch files (dot names) are never keys and never reported.

On Linux the watch is inotify itself (through libc): the thread sleeps in ``poll`` until the
kernel reports a change, or once a second to see ``stop``, so an idle agent's watch costs one
wake-up a second. Elsewhere ``watchfiles`` watches, which looks for changes every few
milliseconds (about 200 wake-ups a second).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

STOP_CHECK_MS = 1000  # how often the watch wakes with no change, to see ``stop``

# inotify(7): the events that mean a key came, went or was replaced, and the watched folder went.
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
KEY_EVENTS = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM
FOLDER_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


def _is_key(name: str) -> bool:
    return bool(name) and not name.startswith(".")


def watch_folder(
    root: Path, prefix: str, changed: Callable[[], None], stop: threading.Event
) -> None:
    """Call ``changed()`` after each change of a key directly under ``root/prefix`` until
    ``stop`` (seen within a second)."""
    libc = _libc()
    if libc is None:
        _watch_with_watchfiles(root, prefix, changed, stop)
        return
    folder = root / prefix.rstrip("/")
    with _inotify(libc) as fd:
        while not stop.is_set():
            present = folder.is_dir()
            target = folder if present else root
            mask = (KEY_EVENTS if present else IN_CREATE | IN_MOVED_TO) | FOLDER_GONE | IN_ONLYDIR
            wd = libc.inotify_add_watch(fd, os.fsencode(target), mask)
            if wd < 0:
                if ctypes.get_errno() != errno.ENOENT:
                    raise OSError(ctypes.get_errno(), f"cannot watch {target}")
                if not present:
                    # The environment's folder itself went (an operator removed it): nothing
                    # to watch until it is back, so look once a second, not in a spin.
                    stop.wait(STOP_CHECK_MS / 1000)
                continue  # pruned since it was seen: watch the root
            if folder.is_dir() == present:  # else it came or went before the watch began
                _follow(fd, wd, folder, present, changed, stop)
            libc.inotify_rm_watch(fd, wd)  # an error (the watch went with its folder) is moot
            if not present and folder.is_dir():
                changed()  # the folder came with its first key


def _follow(
    fd: int,
    wd: int,
    folder: Path,
    present: bool,
    changed: Callable[[], None],
    stop: threading.Event,
) -> None:
    """Report the changes the armed watch ``wd`` sees until its folder comes or goes.

    Armed: a look from here on sees every change before, and inotify reports every change
    after (WatchableStorage: the first call says it is armed)."""
    changed()
    for names, gone in _events(fd, wd, stop):
        if present and any(_is_key(name) for name in names):
            changed()
        if gone or folder.is_dir() != present:
            return  # watch what is there now


def _events(fd: int, wd: int, stop: threading.Event) -> Iterator[tuple[set[str], bool]]:
    """Each batch of events of the watch ``wd`` on ``fd``: the names they concern, and whether
    the watched folder went (events of an earlier watch, such as the ``IN_IGNORED`` its removal
    sends, are not this one's). Sleeps in ``poll`` meanwhile, waking once every
    ``STOP_CHECK_MS`` to see ``stop``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not stop.is_set():
        if not poller.poll(STOP_CHECK_MS):
            continue
        try:
            data = os.read(fd, 64 * 1024)
        except BlockingIOError:
            continue
        names, gone, offset = set(), False, 0
        while offset + EVENT.size <= len(data):
            which, mask, _, length = EVENT.unpack_from(data, offset)
            offset += EVENT.size
            if which == wd:
                names.add(os.fsdecode(data[offset : offset + length].rstrip(b"\0")))
                gone = gone or bool(mask & FOLDER_GONE)
            offset += length
        if names or gone:
            yield names, gone


@contextlib.contextmanager
def _inotify(libc: ctypes.CDLL) -> Iterator[int]:
    fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1 failed")
    try:
        yield fd
    finally:
        os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, if it offers inotify (Linux): looked up once, since ``find_library``
    runs ``ldconfig -p`` in a process of its own each time."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    if not hasattr(libc, "inotify_init1"):
        return None
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


# watchfiles groups events for at most this long before one call: a burst of changes costs one
# look, and a single one is seen within tens of milliseconds.
DEBOUNCE_MS = 20
STEP_MS = 5


def _watch_with_watchfiles(
    root: Path, prefix: str, changed: Callable[[], None], stop: threading.Event
) -> None:
    """The same watch where inotify cannot be had (macOS, Windows), through ``watchfiles``."""
    import watchfiles

    # It logs every change it sees at INFO: once per submission in every agent's log.
    logging.getLogger("watchfiles.main").setLevel(logging.WARNING)
    folder = root / prefix.rstrip("/")
    missing = False  # the folder was gone at the last look: its coming back is a change
    while not stop.is_set():
        present = folder.is_dir()
        if present and missing:
            changed()  # it came (with its first key, maybe) since
        missing = not present
        target = folder if present else root
        if not present and not root.is_dir():
            stop.wait(STOP_CHECK_MS / 1000)  # the environment's folder went: until it is back
            continue
        for changes in watchfiles.watch(
            target,
            watch_filter=lambda change, path: _is_key(Path(path).name),
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=STOP_CHECK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            recursive=False,
        ):
            if present and changes:
                changed()
            # Watch what is there now: the folder came or went, or the root watched while it
            # was missing went too (a watch of a removed folder sees nothing ever again).
            if folder.is_dir() != present or not target.is_dir():
                break
