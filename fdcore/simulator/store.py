"""Each agent's view of the one in-memory store: counted, tapped, and (optionally) failing.

The wrapper sits between an agent (its mailbox and its table leases) and the shared
:class:`~fdcore.builtin.memory.MemoryStorage`. It

* counts every operation and, with a latency, adds a seeded duration per operation to the
  poll's elapsed time, by which the agent's next poll comes later;
* reports every write that landed to the world, which keeps the trace the checkers read, and
  every create of a request (a schedule's), landed or not;
* raises :class:`~fdcore.errors.StorageUnavailable` with the scenario's probability: before
  the operation, or for a write, sometimes *after* applying it (an ambiguous write: the agent
  cannot tell whether it landed);
* reports the store's time of its last write (:class:`fdcore.abc.StoreClock`): the world's
  true virtual time, against which each agent measures its clock's skew;
* calls ``before`` ahead of each operation, where a retention process's calls interleave
  (:mod:`fdcore.simulator.retention`);
* lists with each key's etag and the store's time of its last write
  (:class:`fdcore.abc.VersionedListing`), as one list operation; the times are the world's
  true virtual time, shared by every agent's view of the one store.
"""

from __future__ import annotations

import builtins
import json
import operator
import random
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import cast

from fdcore.abc import Blob, Listed, ListedChanges
from fdcore.builtin.memory import MemoryStorage, changed_since, log_position
from fdcore.contract.layout import CANCELS
from fdcore.errors import AlreadyExists, NotFound, PreconditionFailed, StorageUnavailable

_ETAG = operator.attrgetter("etag")
Tap = Callable[[str, bytes | None], None]  # None: deleted
# (key, data, outcome): "landed", "landed, answer lost", "exists" or "failed"
CreateTap = Callable[[str, bytes, str], None]

# The store's time of each version (etag) of the shared store, shared by every view over it
# (once listed, the version as listed).
_MODIFIED: weakref.WeakKeyDictionary[MemoryStorage, dict[str, datetime | Listed]] = (
    weakref.WeakKeyDictionary()
)
# Each prefix's last listing with versions, shared by every view: (the folder's change count
# then, the listing), reused while nothing under that folder was written or deleted.
_LISTINGS: weakref.WeakKeyDictionary[MemoryStorage, dict[str, tuple[int, list[Listed]]]] = (
    weakref.WeakKeyDictionary()
)


class FaultyStore:
    """:class:`fdcore.abc.Storage` for one agent over the shared store."""

    def __init__(
        self,
        inner: MemoryStorage,
        tap: Tap,
        rng: random.Random,
        error_rate: float,
        ambiguous: float,
        latency: float,
        created: CreateTap,
        store_time: Callable[[], datetime],
    ) -> None:
        self.inner = inner
        self.store_time = store_time
        self.modified = _MODIFIED.setdefault(inner, {})  # etag -> the store's time of its write
        self._listings = _LISTINGS.setdefault(inner, {})
        self._write_time: datetime | None = None
        self.url = inner.url
        self.tap = tap
        self.rng = rng
        self.error_rate = error_rate
        self.ambiguous = ambiguous
        self.latency = latency
        self.created = created
        self.operations: Counter[str] = Counter()
        self.writes: Counter[str] = Counter()  # by top folder: agents, status, leases, runs
        self.request_writes: Counter[str] = Counter()  # by the request a write is for
        self.errors = 0  # raised, in total
        self.ambiguous_writes = 0  # raised after the write applied
        self.poll_operations = 0  # since the poll began
        self.poll_errors = 0
        self.latency_spent = 0.0  # virtual time the poll's operations took
        self.lost_status_writes: list[str] = []  # status replaces refused on the etag this poll
        # told each listing of operators' cancels: what the agent learns was cancelled
        self.listed_cancels: Callable[[list[str]], None] | None = None
        # called before each operation: lets a retention process's calls land between this
        # agent's (the world's), or parks the retention process's own (RetentionProcess)
        self.before: Callable[[], None] | None = None

    def begin_poll(self) -> None:
        self.poll_operations = 0
        self.poll_errors = 0
        self.latency_spent = 0.0
        self.lost_status_writes = []

    def _count(self, kind: str) -> str | None:
        """Count one operation; return "before" or "after" if it is to fail, and when."""
        if self.before is not None:
            self.before()
        self.operations[kind] += 1
        self.poll_operations += 1
        if self.latency:
            # Heavy-tailed (lognormal, mean 1): now and then one call is many times slower.
            self.latency_spent += self.latency * self.rng.lognormvariate(-0.5, 1.0)
        if self.error_rate and self.rng.random() < self.error_rate:
            self.errors += 1
            self.poll_errors += 1
            if kind in ("create", "replace", "delete") and self.rng.random() < self.ambiguous:
                self.ambiguous_writes += 1
                return "after"
            return "before"
        return None

    @staticmethod
    def _unavailable(kind: str, key: str) -> StorageUnavailable:
        return StorageUnavailable(key, f"simulated transient failure of {kind}")

    def read(self, key: str) -> Blob | None:
        if self._count("read"):
            raise self._unavailable("read", key)
        return self.inner.read(key)

    def last_write_time(self) -> datetime | None:
        """:class:`fdcore.abc.StoreClock`: the true virtual time of this view's last write."""
        return self._write_time

    def _write(self, kind: str, key: str, data: bytes | None = None) -> str | None:
        self._write_time = self.store_time()  # a write lands at the poll's time (atomic)
        self.writes[key.split("/", 1)[0]] += 1
        request = _request_of(key, data)
        if request is not None:
            self.request_writes[request] += 1
        return self._count(kind)

    def create(self, key: str, data: bytes) -> str:
        fail = self._write("create", key, data)
        request = key.startswith("requests/")
        if fail == "before":
            if request:
                self.created(key, data, "failed")
            raise self._unavailable("create", key)
        try:
            etag = self.inner.create(key, data)
        except AlreadyExists:
            if request:
                self.created(key, data, "exists")
            raise
        self.modified[etag] = self.store_time()
        self.tap(key, data)
        if request:
            self.created(key, data, "landed, answer lost" if fail else "landed")
        if fail:
            raise self._unavailable("create", key)
        return etag

    def replace(self, key: str, data: bytes, etag: str) -> str:
        fail = self._write("replace", key, data)
        if fail == "before":
            raise self._unavailable("replace", key)
        try:
            new = self.inner.replace(key, data, etag)
        except (PreconditionFailed, NotFound):
            if key.startswith("status/"):
                self.lost_status_writes.append(key[len("status/") : -len(".json")])
            raise
        self.modified.pop(etag, None)
        self.modified[new] = self.store_time()
        self.tap(key, data)
        if fail:
            raise self._unavailable("replace", key)
        return new

    def delete(self, key: str, etag: str | None = None) -> None:
        fail = self._write("delete", key)
        if fail == "before":
            raise self._unavailable("delete", key)
        gone = self.inner._space.objects.get(key)
        self.inner.delete(key, etag)
        if gone is not None:
            self.modified.pop(gone.etag, None)
        self.tap(key, None)
        if fail:
            raise self._unavailable("delete", key)

    def list(self, prefix: str = "") -> Iterator[str]:
        if self._count("list"):
            raise self._unavailable("list", prefix)
        return iter(self._keys(prefix))

    def _keys(self, prefix: str) -> builtins.list[str]:
        """The shared store's keys under ``prefix`` (the list operation counted already)."""
        keys = list(self.inner.list(prefix))
        if prefix == CANCELS and self.listed_cancels is not None:
            self.listed_cancels(keys)
        return keys

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        """:class:`fdcore.abc.VersionedListing`: one list operation, each key with its etag and
        the true virtual time of its write (a version written past the views, by the world
        itself, is stamped when first listed)."""
        if self._count("list"):
            raise self._unavailable("list", prefix)
        return iter(self._versions(prefix))

    def list_changes(self, prefix: str, cursor: object | None = None) -> ListedChanges:
        """:class:`fdcore.abc.ListingChanges`: one list operation, what changed under ``prefix``
        since ``cursor`` from the shared store's log of writes, each version as
        :meth:`list_versions` gives it (operators' cancels are listed whole: the world follows
        each listing of them)."""
        if self._count("list"):
            raise self._unavailable("list", prefix)
        space = self.inner._space
        since = None if prefix == CANCELS else changed_since(space, prefix, cursor)
        position = log_position(space, prefix)
        if since is None:
            return ListedChanges((space, prefix, position), True, self._versions(prefix), [])
        objects = space.objects
        listed: builtins.list[Listed] = []
        removed: builtins.list[str] = []
        modified = self.modified
        for key in since:  # each poll of every agent takes the fleet's writes here
            blob = objects.get(key)
            if blob is None:
                removed.append(key)
            else:
                item = modified.get(blob.etag)
                listed.append(item if type(item) is Listed else self._stamped(key, blob))
        return ListedChanges((space, prefix, position), False, listed, removed)

    def _stamped(self, key: str, blob: Blob) -> Listed:
        """``key``'s version as listed: stamped with its write's time, or now when the world
        wrote it past the views (the first listing of it)."""
        item = self.modified.get(blob.etag)
        if isinstance(item, Listed):
            return item
        item = self.modified[blob.etag] = Listed(key, blob.etag, item or self.store_time())
        return item

    def _versions(self, prefix: str) -> builtins.list[Listed]:
        """The listing of ``prefix`` with versions (the list operation counted already)."""
        changes = self.inner._space.changes.get(prefix.partition("/")[0], 0)
        cached = self._listings.get(prefix)
        if cached is not None and cached[0] == changes and prefix != CANCELS:
            return cached[1]  # nothing under the folder written or deleted since
        keys = self._keys(prefix)
        # The shared store's own map, in one pass: what its listing would carry, no read counted.
        objects = self.inner._space.objects
        listed = _listed_before(objects, self.modified, keys)
        if listed is None:
            listed = [self._stamped(key, blob) for key in keys if (blob := objects.get(key))]
        if "/" in prefix:  # a top folder's listing: its change count tells
            self._listings[prefix] = (changes, listed)
        return listed

    def close(self) -> None:
        pass


def _listed_before(
    objects: dict[str, Blob], modified: dict[str, datetime | Listed], keys: list[str]
) -> list[Listed] | None:
    """The versions of ``keys`` if every one was listed before (in C, no loop here); None when
    one is new or gone."""
    blobs = list(map(objects.get, keys))
    if None in blobs:
        return None
    items = list(map(modified.get, map(_ETAG, blobs)))
    if set(map(type, items)) - {Listed}:
        return None
    return cast(list[Listed], items)


def _request_of(key: str, data: bytes | None) -> str | None:
    """The request a write is for: named by its key (a request, its status, its run records)
    or, for a lease and its fence, by the lease; None for an agent's record and the rest."""
    folder, _, rest = key.partition("/")
    if folder in ("requests", "status"):
        return rest.removesuffix(".json")
    if folder == "runs":
        return rest.split("/", 1)[0]
    if folder in ("leases", "fences") and data is not None:
        request = json.loads(data).get("request")
        return request if isinstance(request, str) else None
    return None
