"""An in-memory store for unit tests and the simulator (``memory://<name>``).

Stores with the same name share their objects within one process, so several agents in one test
see one mailbox. It is thread-safe; it is not shared across processes.
"""

from __future__ import annotations

import bisect
import builtins
import itertools
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from fdcore.abc import (
    Blob,
    Listed,
    ListedChanges,
    check_precondition,
    validate_key,
    validate_prefix,
)
from fdcore.errors import AlreadyExists, EnvironmentNotFound


class _Space:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, Blob] = {}
        self.modified: dict[str, datetime] = {}  # when each key's version was written
        self.keys: list[str] = []  # sorted, for list-by-prefix
        # Writes and deletes so far by top folder: a listing cached at a count is still true.
        self.changes: dict[str, int] = {}
        # The keys written or deleted, by top folder, in order (ListingChanges); the first
        # ``dropped`` of each were forgotten (a cursor before them gets a whole listing).
        self.log: dict[str, list[str]] = {}
        self.dropped: dict[str, int] = {}
        self.counter = itertools.count(1)


#: How many writes of one top folder the memory store remembers for ListingChanges.
LOG_LIMIT = 1 << 20

_spaces: dict[str, _Space] = {}
_spaces_lock = threading.Lock()


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class MemoryStorage:
    """The :class:`fdcore.abc.Storage` protocol over a dict; etags are a global counter.

    Also a :class:`fdcore.abc.VersionedListing`: each version is stamped by ``clock`` when
    written (the process's UTC time; a simulation passes its virtual clock).
    """

    def __init__(self, name: str = "default", clock: Callable[[], datetime] = _utc_now) -> None:
        self.url = f"memory://{name}"
        self.clock = clock
        with _spaces_lock:
            self._space = _spaces.setdefault(name, _Space())
        self.operations = 0  # counted for the simulator's store-operations figure

    @classmethod
    def fresh(cls, name: str) -> MemoryStorage:
        """A store whose space starts empty, dropping any earlier one of that name."""
        with _spaces_lock:
            _spaces[name] = _Space()
        return cls(name)

    def _write(self, key: str, data: bytes) -> Blob:
        """Store a new version of ``key`` (the caller holds the lock)."""
        blob = Blob(bytes(data), f'"m{next(self._space.counter)}"')
        self._space.objects[key] = blob
        self._space.modified[key] = self.clock()
        self._changed(key)
        return blob

    def _changed(self, key: str) -> None:
        folder = key.partition("/")[0]
        self._space.changes[folder] = self._space.changes.get(folder, 0) + 1
        log = self._space.log.setdefault(folder, [])
        log.append(key)
        if len(log) > LOG_LIMIT:  # keep the newer half: older cursors get a whole listing
            self._space.dropped[folder] = self._space.dropped.get(folder, 0) + len(log) // 2
            del log[: len(log) // 2]

    def read(self, key: str) -> Blob | None:
        validate_key(key)
        self.operations += 1
        with self._space.lock:
            return self._space.objects.get(key)

    def create(self, key: str, data: bytes) -> str:
        validate_key(key)
        self.operations += 1
        with self._space.lock:
            if key in self._space.objects:
                raise AlreadyExists(key, "already exists")
            blob = self._write(key, data)
            bisect.insort(self._space.keys, key)
            return blob.etag

    def replace(self, key: str, data: bytes, etag: str) -> str:
        validate_key(key)
        self.operations += 1
        with self._space.lock:
            check_precondition(key, self._space.objects.get(key), etag)
            return self._write(key, data).etag

    def delete(self, key: str, etag: str | None = None) -> None:
        validate_key(key)
        self.operations += 1
        with self._space.lock:
            check_precondition(key, self._space.objects.get(key), etag)
            del self._space.objects[key]
            del self._space.modified[key]
            del self._space.keys[bisect.bisect_left(self._space.keys, key)]
            self._changed(key)

    def list(self, prefix: str = "") -> Iterator[str]:
        validate_prefix(prefix)
        self.operations += 1
        with self._space.lock:
            return iter(self._under(prefix))

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        """:class:`fdcore.abc.VersionedListing`: one listing, each key with its version."""
        validate_prefix(prefix)
        self.operations += 1
        space = self._space
        with space.lock:
            return iter(
                [
                    Listed(key, space.objects[key].etag, space.modified[key])
                    for key in self._under(prefix)
                ]
            )

    def list_changes(self, prefix: str, cursor: object | None = None) -> ListedChanges:
        """:class:`fdcore.abc.ListingChanges`: what changed under ``prefix`` since ``cursor``."""
        if type(self).list_versions is not MemoryStorage.list_versions:
            # A subclass that stamps its own versions: its whole listing, each time.
            return ListedChanges(None, True, list(self.list_versions(prefix)), [])
        validate_prefix(prefix)
        self.operations += 1
        space = self._space
        with space.lock:
            since = changed_since(space, prefix, cursor)
            position = log_position(space, prefix)
            if since is None:
                listed = [
                    Listed(key, space.objects[key].etag, space.modified[key])
                    for key in self._under(prefix)
                ]
                return ListedChanges((space, prefix, position), True, listed, [])
            listed, removed = [], []
            for key in since:
                blob = space.objects.get(key)
                if blob is None:
                    removed.append(key)
                else:
                    listed.append(Listed(key, blob.etag, space.modified[key]))
            return ListedChanges((space, prefix, position), False, listed, removed)

    def _under(self, prefix: str) -> builtins.list[str]:
        """The keys that start with ``prefix``, in order (the caller holds the lock)."""
        keys = self._space.keys
        if not prefix:
            return keys.copy()
        # Every key under the prefix sorts between it and the prefix with its last
        # character bumped: two bisections instead of a test per key.
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return keys[bisect.bisect_left(keys, prefix) : bisect.bisect_left(keys, end)]

    def close(self) -> None:
        pass


def log_position(space: _Space, prefix: str) -> int | None:
    """How many writes under ``prefix``'s top folder the store has seen; None for a prefix with
    no top folder (always listed whole)."""
    folder, slash, _ = prefix.partition("/")
    if not slash:
        return None
    return space.dropped.get(folder, 0) + len(space.log.get(folder, ()))


def changed_since(space: _Space, prefix: str, cursor: object | None) -> list[str] | None:
    """The keys under ``prefix`` written or deleted since ``cursor`` (a position of
    :func:`log_position`), in key order; None when the log cannot tell (no cursor, another
    store's or prefix's, or one older than what the log keeps)."""
    if not isinstance(cursor, tuple) or len(cursor) != 3:
        return None
    owner, listed_prefix, position = cursor
    if owner is not space or listed_prefix != prefix or not isinstance(position, int):
        return None
    folder = prefix.partition("/")[0]
    start = position - space.dropped.get(folder, 0)
    if start < 0:
        return None
    log = space.log.get(folder, [])
    if prefix == f"{folder}/":  # every key the folder logged (the whole set built in C)
        return sorted(set(log[start:]))
    return sorted({key for key in log[start:] if key.startswith(prefix)})


class MemoryBackend:
    """``memory://<name>``: one process's in-memory store."""

    name = "memory"

    def accepts(self, url: str) -> bool:
        return url.startswith("memory://")

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> MemoryStorage:
        name = url.removeprefix("memory://") or "default"
        with _spaces_lock:
            missing = name not in _spaces
        if missing and not create:
            raise EnvironmentNotFound(url, "no memory store of that name in this process")
        return MemoryStorage(name)
