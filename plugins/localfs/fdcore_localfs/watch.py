"""Telling an agent at once that a key appeared under a prefix: inotify, through ``watchfiles``.

The folder of the prefix (``requests/``) may not exist yet, and a delete that empties it prunes
it (see ``LocalFolderStorage._prune``): while it is missing the root is watched, not
recursively, until it comes back. Scratch files (dot names) are never keys and never reported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import watchfiles

# inotify events are grouped for at most this long before one call: a burst of submissions
# costs one look, and a single one is seen within tens of milliseconds.
DEBOUNCE_MS = 20
STEP_MS = 5
STOP_CHECK_MS = 1000  # how often the watch wakes with no change, to see ``stop``


def _is_key(change: watchfiles.Change, path: str) -> bool:
    return not Path(path).name.startswith(".")


def watch_folder(
    root: Path, prefix: str, changed: Callable[[], None], stop: threading.Event
) -> None:
    """Call ``changed()`` after each burst of changes under ``root/prefix`` until ``stop``."""
    folder = root / prefix.rstrip("/")
    while not stop.is_set():
        present = folder.is_dir()
        target = folder if present else root
        for changes in watchfiles.watch(
            target,
            watch_filter=_is_key,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=STOP_CHECK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            recursive=present,
        ):
            if present and changes:
                changed()
            if folder.is_dir() != present:
                if not present:
                    changed()  # the folder came with its first key
                break  # watch what is there now
