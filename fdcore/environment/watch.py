"""The store's watch of a few mailbox folders, shared by an environment's waits and
``changes()``: one watching thread per folder, however many callers listen.

Only a store that offers :class:`~fdcore.abc.WatchableStorage` (a local folder: inotify) is
watched; elsewhere :attr:`StoreWatch.available` is False and callers poll. A watch that fails
(say, out of inotify watches) is logged once and callers fall back to polling: they re-read at
least every ``poll`` seconds either way, so a missed event delays, never loses, a change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from fdcore.abc import Storage, WatchableStorage

__all__ = ["StoreWatch"]

log = logging.getLogger("fdcore.environment")

#: A folder's watch may miss changes until its thread has armed it: until its first call, for
#: at most :data:`SETTLING` seconds, callers look every :data:`SETTLING_LOOK` seconds, not
#: every ``poll`` (half a second was too short on a loaded machine: a status landing before
#: the watch was armed waited a whole poll).
SETTLING = 3.0
SETTLING_LOOK = 0.05


class StoreWatch:
    """Calls each listener of a folder soon after a key under it changes, until ``stop``."""

    def __init__(self, storage: Storage, stop: threading.Event) -> None:
        self._storage = storage if isinstance(storage, WatchableStorage) else None
        self._stop = stop
        self._lock = threading.Lock()
        self._listeners: dict[str, dict[int, Callable[[], None]]] = {}
        self._next = 0
        self._started: dict[str, float] = {}  # prefix -> when its watch started (monotonic)
        self._armed: set[str] = set()  # prefixes whose store has called since their start

    @property
    def available(self) -> bool:
        """Whether the store can watch (else listeners are never called)."""
        return self._storage is not None

    def listen(self, prefix: str, changed: Callable[[], None]) -> Callable[[], None]:
        """Call ``changed()`` (from the watching thread: keep it short) after each change under
        ``prefix``; return what stops it. Starts the folder's watch on first use."""
        with self._lock:
            self._next += 1
            number = self._next
            listeners = self._listeners.get(prefix)
            if listeners is None:
                listeners = self._listeners[prefix] = {}
                self._start(prefix)
            listeners[number] = changed

        def stop_listening() -> None:
            with self._lock:
                self._listeners[prefix].pop(number, None)

        return stop_listening

    def wake_all(self) -> None:
        """Call each listener once now: as ``stop`` is set, a caller pausing between two looks
        looks again at once (and finds the environment closed)."""
        with self._lock:
            listeners = [changed for each in self._listeners.values() for changed in each.values()]
        for changed in listeners:
            changed()

    def pause(self, prefix: str, poll: float) -> float:
        """How long a caller listening to ``prefix`` may pause between two looks: ``poll``, or
        :data:`SETTLING_LOOK` while the folder's watch is not known to be armed yet (it may
        miss a change)."""
        with self._lock:
            started = None if prefix in self._armed else self._started.get(prefix)
        if started is not None and time.monotonic() - started < SETTLING:
            return min(poll, SETTLING_LOOK)
        return poll

    def _start(self, prefix: str) -> None:
        if self._storage is None or self._stop.is_set():
            return
        storage = self._storage
        self._started[prefix] = time.monotonic()

        def watch() -> None:
            try:
                storage.watch(prefix, lambda: self._changed(prefix), self._stop)
            except Exception as exc:  # a watch that fails leaves the callers polling
                log.warning("not watching %s of %s: %s", prefix, storage, exc)

        threading.Thread(target=watch, name=f"fdcore-watch-{prefix}", daemon=True).start()

    def _changed(self, prefix: str) -> None:
        with self._lock:
            self._armed.add(prefix)
            listeners = list(self._listeners.get(prefix, {}).values())
        for changed in listeners:
            changed()
