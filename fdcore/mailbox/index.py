"""One mailbox index: list a folder, read again only what changed (the informer idea).

A reader that looks at the mailbox over and over (the agent's discovery and sweep, the incident
evaluator, retention, the monitor, ``fdcore queue --watch``) lists a folder each time, but reads
a file only when it may have changed since its last read:

- with a store that offers :class:`fdcore.abc.VersionedListing`, the listing carries each key's
  etag: a file whose listed etag equals the one it was read at is not read again;
- a request, a final status and a run record never change once written: each is read once per
  index (while it stays listed), with or without etags;
- otherwise a file is read again at each look, unless the store tells cheaply that it is
  unchanged (:class:`fdcore.abc.ChangeCheck`).

Every read is bounded (the mailbox's ``max_file_bytes``) and total: a malformed file is
reported once through the mailbox's :class:`~fdcore.mailbox.access.ProblemLog` and comes back as
a problem, never as an exception (only :class:`~fdcore.errors.StorageUnavailable` leaves, for
the caller's outage handling). Keys that leave the listing are forgotten.

The API::

    index = MailboxIndex(mailbox)
    index.statuses.list()        # id -> Listed (etag, modified) or None: one list call
    index.statuses.get("r1")     # Entry: the status as last read, read now only if it changed
    index.statuses.entries()     # list, then get every listed id
    index.requests, index.agents, index.cancels   # the same, for those folders
    index.runs("r1")             # the request's run records, each read once

An index is not shared across threads (a store handle is not); the lock only keeps a caller
that does share one from corrupting it.
"""

from __future__ import annotations

import builtins
import itertools
import operator
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Generic, TypeVar, cast

import attrs

from fdcore.abc import ChangeCheck, Listed, ListedChanges, ListingChanges, VersionedListing
from fdcore.contract.ids import validate_id
from fdcore.contract.layout import AGENTS, CANCELS, REQUESTS, RUNS, STATUS
from fdcore.contract.models import AgentRecord, Cancel, Request, RunRecord, Status
from fdcore.errors import MailboxFileError
from fdcore.mailbox.access import Mailbox, Versioned, folders_in_place

T = TypeVar("T")
_KEY = operator.attrgetter("key")  # a listed version's key
#: How many more log entries than twice the listed ids a folder keeps (Folder.since).
LOG_SLACK = 4096


@attrs.frozen
class Entry(Generic[T]):
    """One file of a folder as the index knows it.

    ``found`` is the file as last read (None: absent when read, or malformed); ``problem`` says
    what is wrong with a malformed one. ``etag`` and ``modified`` come from the last listing
    (None without :class:`~fdcore.abc.VersionedListing`); ``modified`` is the store's time of
    the write that made the listed version, by the store's clock.
    """

    id: str
    key: str
    found: Versioned[T] | None
    problem: str | None = None
    etag: str | None = None
    modified: datetime | None = None

    @property
    def value(self) -> T | None:
        return self.found.value if self.found is not None else None


def _never(value: object) -> bool:
    return False


def _always(value: object) -> bool:
    return True


def _final(status: Status) -> bool:
    return status.state.final


class Folder(Generic[T]):
    """One folder of ``<id>.json`` files of one kind (``requests/``, ``status/``, ``agents/``)."""

    def __init__(
        self,
        mailbox: Mailbox,
        prefix: str,
        cls: type[T],
        settled: Callable[[T], bool] = _never,
        lock: threading.RLock | None = None,
    ) -> None:
        self.mailbox = mailbox
        self.prefix = prefix
        self.cls = cls
        self.settled = settled  # a value that never changes once written: read once
        self.lock = lock or threading.RLock()
        # Whether the store's listing carries etags: asked once (a runtime protocol check is slow).
        self.versioned = isinstance(mailbox.storage, VersionedListing)
        storage = mailbox.storage
        self._check = storage if isinstance(storage, ChangeCheck) else None
        self.listed: dict[str, Listed | None] = {}  # the last listing: id -> version (or None)
        self._read: dict[str, Entry[T]] = {}  # id -> the last read, with the etag read at
        self._read_at: dict[str, str | None] = {}  # id -> the listed etag when it was read
        self._listing: list[Listed] = []  # the last listing with versions, as the store gave it
        # With ListingChanges: the store's cursor, each listed key's id (None: a refused
        # name), and the keys refused.
        self._changes = storage if self.versioned and isinstance(storage, ListingChanges) else None
        self._cursor: object | None = None
        self._ids: dict[str, str | None] = {}
        self._refused: set[str] = set()
        self._in_order = True  # listed is in the listing's (key) order
        # The ids whose listed version changed or that were read, in order: a reader that
        # follows the folder keeps its position in it (since) instead of comparing listings.
        self.log: list[str] = []
        self.log_start = 0  # the position of log[0]
        # Ids whose file is a folder in the last listing (keys below it): id -> the problem.
        self.misplaced: dict[str, str] = {}

    def list(self) -> dict[str, Listed | None]:
        """List the folder (one list call): id -> its listed version (None without
        VersionedListing), in the listing's order. Forgets what it knew of ids no longer
        listed."""
        with self.lock:
            self.refresh()
            if not self._in_order:
                self.listed = dict(sorted(self.listed.items(), key=self._key_of))
                self._in_order = True
            return self.listed

    def refresh(self) -> None:
        """List the folder (one list call) into :attr:`listed`, in no particular order, and
        append to :attr:`log` the ids whose listed version changed (added, replaced, gone).
        With :class:`~fdcore.abc.ListingChanges` this costs what changed since the last
        listing; otherwise the whole listing."""
        storage = self.mailbox.storage
        with self.lock:
            if self._changes is not None:
                self._apply(self._changes.list_changes(self.prefix, self._cursor))
                return
            if self.versioned:
                listing = list(cast(VersionedListing, storage).list_versions(self.prefix))
                if listing == self._listing:
                    return  # the same versions again (compared at C speed)
                self._listing = listing
                keys = list(map(_KEY, listing))
                names = self.mailbox.checked_names(self.prefix, keys)
                # id -> version in listing order, bad names (None) left out: in C, no loop here
                by_id: dict[str | None, Listed | None] = dict(
                    zip(map(names.get, keys), listing, strict=True)
                )
                by_id.pop(None, None)
                listed = cast(dict[str, Listed | None], by_id)
            else:
                keys = list(storage.list(self.prefix))
                names = self.mailbox.checked_names(self.prefix, keys)
                listed = dict.fromkeys(filter(None, map(names.get, keys)))
            # Only when a name was refused: a look pays no loop over the keys otherwise.
            misplaced = len(listed) < len(keys)
            self.misplaced = folders_in_place(self.prefix, keys, names) if misplaced else {}
            self._replace(listed)

    def _replace(self, listed: dict[str, Listed | None]) -> None:
        """Take ``listed`` as the whole listing: log what differs from the last one."""
        before = self.listed
        self.listed = listed
        self._in_order = True
        self._log({id for id, _ in listed.items() ^ before.items()})
        for gone in self._read.keys() - listed.keys():
            del self._read[gone]
            self._read_at.pop(gone, None)

    def _apply(self, changes: ListedChanges) -> None:
        """Take a :class:`~fdcore.abc.ListedChanges` into the listing."""
        self._cursor = changes.cursor
        if changes.complete:
            keys = list(map(_KEY, changes.listed))
            names = self.mailbox.checked_names(self.prefix, keys)
            self._ids = {key: names.get(key) for key in keys}
            self._refused = {key for key, id in self._ids.items() if id is None}
            listed = {names[v.key]: v for v in changes.listed if names.get(v.key) is not None}
            self._replace(cast(dict[str, Listed | None], listed))
        else:
            self._log(self._apply_changes(changes))
        refused = sorted(self._refused)
        self.misplaced = folders_in_place(self.prefix, refused, self._ids) if refused else {}

    def _apply_changes(self, changes: ListedChanges) -> builtins.list[str]:
        """Take what changed since the last listing; the ids changed, in the answer's order.
        (A hot path: each poll of every agent of a fleet takes the fleet's writes here.)"""
        ids, listed, refused = self._ids, self.listed, self._refused
        changed: builtins.list[str] = []
        for key in changes.removed:
            id = ids.pop(key, None)
            refused.discard(key)
            if id is not None:
                listed.pop(id, None)
                self._read.pop(id, None)
                self._read_at.pop(id, None)
                changed.append(id)
        versions = changes.listed
        keys = list(map(_KEY, versions))
        new = list(itertools.filterfalse(ids.__contains__, keys))
        if new:
            last = self._last_key()
            names = self.mailbox.checked_names(self.prefix, new)
            for key in new:
                id = ids[key] = names.get(key)
                if id is None:
                    refused.add(key)
                elif last is not None and key < last:
                    self._in_order = False  # a new key amid the listed ones
        found = list(map(ids.__getitem__, keys))  # in C: no loop over the versions here
        if None in found:  # refused names: left out
            kept = [n for n, id in enumerate(found) if id is not None]
            versions = [versions[n] for n in kept]
            found = [found[n] for n in kept]
        accepted = cast(builtins.list[str], found)
        listed.update(zip(accepted, versions, strict=True))
        changed.extend(accepted)
        return changed

    def _last_key(self) -> str | None:
        """The key of the last id in :attr:`listed` (the greatest while in order)."""
        if not self.listed or not self._in_order:
            return None
        return self._key_of((next(reversed(self.listed)), None))

    def _key_of(self, item: tuple[str, object]) -> str:
        return f"{self.prefix}{item[0]}.json"

    def _log(self, ids: Iterable[str]) -> None:
        self.log.extend(ids)
        if len(self.log) > 2 * len(self.listed) + LOG_SLACK:
            # Forget the older half: a reader behind it looks at every listed id again.
            half = len(self.log) // 2
            self.log_start += half
            del self.log[:half]

    def since(self, position: int) -> tuple[builtins.list[str] | None, int]:  # list: a method
        """The ids logged since ``position`` (ids whose listed version changed or that were
        read), and the position to ask from next; None instead of the ids when the log forgot
        some of them (look at every listed id)."""
        with self.lock:
            end = self.log_start + len(self.log)
            if position < self.log_start:
                return None, end
            return self.log[position - self.log_start :], end

    def changed(self, id: str) -> bool:
        """Whether ``id`` must be read to be known: never read, or its listed etag moved since
        (without etags: unless settled, or the store says it is unchanged)."""
        with self.lock:
            known = self._read.get(id)
            if known is None:
                return True
            listed = self.listed.get(id)
            if listed is not None:
                return listed.etag != self._read_at.get(id)
            if known.value is not None and self.settled(known.value):
                return False
            return not self._unchanged(known)

    def _unchanged(self, known: Entry[T]) -> bool:
        if known.found is None or self._check is None:
            return False
        return self._check.unchanged(known.key, known.found.etag)

    def get(self, id: str) -> Entry[T]:
        """``id``'s file, read now only if it may have changed (:meth:`changed`)."""
        with self.lock:
            if not self.changed(id):
                return self._read[id]
            return self.read(id)

    def read(self, id: str) -> Entry[T]:
        """Read ``id``'s file now, whatever is known of it. Never raises for a bad file."""
        key = f"{self.prefix}{id}.json"
        with self.lock:
            listed = self.listed.get(id)
            try:
                found, problem = self.mailbox.read(self.cls, key), None
            except MailboxFileError as exc:
                self.mailbox.problems.report(key, str(exc))
                found, problem = None, str(exc)
            entry = Entry(
                id,
                key,
                found,
                problem,
                listed.etag if listed else None,
                listed.modified if listed else None,
            )
            if found is not None and listed is not None and found.etag != listed.etag:
                # Changed again between the listing and the read: what was read is newer.
                entry = attrs.evolve(entry, etag=found.etag, modified=None)
            self._read[id] = entry
            self._read_at[id] = listed.etag if listed is not None else None
            self._log((id,))
            return entry

    def read_ids(self) -> set[str]:
        """The ids read at least once (and still listed)."""
        with self.lock:
            return set(self._read)

    def known(self, id: str) -> Entry[T] | None:
        """What the last read of ``id`` gave, without reading; None if never read."""
        return self._read.get(id)  # one dict lookup: atomic, no lock needed (a hot path)

    def entries(self, ids: Iterable[str] | None = None) -> dict[str, Entry[T]]:
        """List the folder, then every listed id (or only ``ids`` of them), read as needed."""
        with self.lock:
            listed = self.list()
            wanted = listed if ids is None else [i for i in ids if i in listed]
            return {i: self.get(i) for i in wanted}


class MailboxIndex:
    """The index of one mailbox: a :class:`Folder` per kind, and each request's run records."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        self.lock = threading.RLock()
        self.requests: Folder[Request] = Folder(mailbox, REQUESTS, Request, _always, self.lock)
        self.statuses: Folder[Status] = Folder(mailbox, STATUS, Status, _final, self.lock)
        self.agents: Folder[AgentRecord] = Folder(mailbox, AGENTS, AgentRecord, _never, self.lock)
        self.cancels: Folder[Cancel] = Folder(mailbox, CANCELS, Cancel, _always, self.lock)
        self._runs: dict[str, RunRecord | str] = {}  # key -> record, or what is wrong with it

    @property
    def versioned(self) -> bool:
        """Whether the store's listing carries etags (:class:`~fdcore.abc.VersionedListing`)."""
        return self.statuses.versioned

    def runs(self, request_id: str) -> tuple[list[RunRecord], list[str]]:
        """The request's run records (one list call; each record read once per index), and
        what is wrong with those that could not be read."""
        prefix = f"{RUNS}{validate_id(request_id, 'request id')}/"
        records: list[RunRecord] = []
        problems: list[str] = []
        with self.lock:
            keys = list(self.mailbox.storage.list(prefix))
            for key in keys:
                known = self._runs.get(key)
                if known is None:
                    known = self._read_run(key)
                    if known is None:
                        continue
                if isinstance(known, str):
                    problems.append(known)
                else:
                    records.append(known)
            self._forget_runs(prefix, set(keys))
        return records, problems

    def _read_run(self, key: str) -> RunRecord | str | None:
        try:
            found = self.mailbox.read(RunRecord, key)
        except MailboxFileError as exc:
            self.mailbox.problems.report(key, str(exc))
            self._runs[key] = str(exc)
            return str(exc)
        if found is None:
            return None
        self._runs[key] = found.value
        return found.value

    def _forget_runs(self, prefix: str, present: set[str]) -> None:
        for key in [k for k in self._runs if k.startswith(prefix) and k not in present]:
            del self._runs[key]

    def forget_runs_except(self, request_ids: set[str]) -> None:
        """Forget the run records of requests not in ``request_ids`` (archived or gone)."""
        with self.lock:
            for key in list(self._runs):
                if key[len(RUNS) :].partition("/")[0] not in request_ids:
                    del self._runs[key]
