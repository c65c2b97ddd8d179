"""Deliberately broken storage: each wrapper keeps every promise of :class:`fdcore.abc.Storage`
but one, so a test can prove the conformance suite catches that one.

Each class wraps any store (the in-memory one in fdcore's own tests, your backend in yours) and
names, as ``promise``, the probe of :mod:`fdcore.conformance.probes` (the ``fdcore doctor``
line) that must fail on it. :func:`catch` runs that probe on the wrapped store;
``BrokenBackendTests`` in :mod:`fdcore.testing.storage_suite` runs it for every class in
:data:`BROKEN_STORES` with your suite's flags. No pytest here: race workers unpickle these
classes in child processes.
"""

from __future__ import annotations

import builtins
import fnmatch
import itertools
import re
import time
import unicodedata
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import ClassVar

import attrs

from fdcore.abc import (
    Blob,
    Listed,
    Storage,
    VersionedListing,
    check_precondition,
    validate_key,
    validate_prefix,
)
from fdcore.conformance.probes import PROBES_BY_NAME, Observation, ProbeContext, StorageFactory
from fdcore.errors import AlreadyExists, InvalidKey, NotFound, PreconditionFailed

__all__ = [
    "BROKEN_STORES",
    "RACE_WINDOW",
    "BrokenFactory",
    "BrokenStorage",
    "CappedValues",
    "CaseFoldingKeys",
    "CheckThenCreate",
    "CheckThenReplace",
    "EtagBlindDelete",
    "EtagBlindReplace",
    "FirstPageListing",
    "FirstPageVersions",
    "FolderListing",
    "GlobListing",
    "LaxKeys",
    "LikeListing",
    "ListingTimeModified",
    "NaiveModified",
    "NormalisingKeys",
    "OverwritingCreate",
    "SameEtagAfterReplace",
    "StaleList",
    "StaleListedEtag",
    "StaleRead",
    "TornReplace",
    "UnboundedRead",
    "UnsortedListing",
    "catch",
]

#: How long a check-then-act wrapper waits between its check and its act: long enough for
#: racers in other processes to pass the same check.
RACE_WINDOW = 0.005


class BrokenStorage:
    """A store that forwards every call to ``inner``; each subclass breaks one promise."""

    #: The property (probe and doctor line) this store breaks.
    promise: ClassVar[str] = ""
    #: The optional protocols (by name) the wrapped store must offer for this one to break.
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.url = inner.url

    @classmethod
    def describe(cls) -> str:
        """How it is broken, in one line (its docstring)."""
        return " ".join((cls.__doc__ or cls.__name__).split())

    def read(self, key: str) -> Blob | None:
        return self.inner.read(key)

    def create(self, key: str, data: bytes) -> str:
        return self.inner.create(key, data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        return self.inner.replace(key, data, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self.inner.delete(key, etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list(prefix)

    def close(self) -> None:
        self.inner.close()


# -- listing -------------------------------------------------------------------------------------


class LikeListing(BrokenStorage):
    """Lists with SQL ``LIKE 'prefix%'``: case-insensitive, ``_`` and ``%`` are wildcards."""

    promise = "exact-prefix"

    def list(self, prefix: str = "") -> Iterator[str]:
        validate_prefix(prefix)
        like = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in prefix)
        pattern = re.compile(like + ".*", re.IGNORECASE | re.DOTALL)
        return (key for key in self.inner.list() if pattern.fullmatch(key))


class GlobListing(BrokenStorage):
    """Lists with a glob ``prefix*``: ``*``, ``?`` and ``[...]`` in the prefix are patterns."""

    promise = "exact-prefix"

    def list(self, prefix: str = "") -> Iterator[str]:
        validate_prefix(prefix)
        return (key for key in self.inner.list() if fnmatch.fnmatchcase(key, prefix + "*"))


class FolderListing(BrokenStorage):
    """Treats a prefix as a folder: ``a/b`` lists ``a/b/y`` but not ``a/b.json``."""

    promise = "exact-prefix"

    def list(self, prefix: str = "") -> Iterator[str]:
        folder = prefix if prefix.endswith("/") or not prefix else prefix + "/"
        return (key for key in self.inner.list(prefix) if key.startswith(folder) or key == prefix)


class UnsortedListing(BrokenStorage):
    """Lists the right keys in reverse order."""

    promise = "exact-prefix"

    def list(self, prefix: str = "") -> Iterator[str]:
        return reversed(builtins.list(self.inner.list(prefix)))


class FirstPageListing(BrokenStorage):
    """Says its listing comes in pages of 100 keys, and returns the first page only."""

    promise = "list-paging"
    list_page_size = 100

    def list(self, prefix: str = "") -> Iterator[str]:
        return itertools.islice(self.inner.list(prefix), self.list_page_size)


class StaleList(BrokenStorage):
    """Remembers each listing and answers the same prefix from memory ever after."""

    promise = "list-after-write"

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        self._listed: dict[str, builtins.list[str]] = {}

    def list(self, prefix: str = "") -> Iterator[str]:
        if prefix not in self._listed:
            self._listed[prefix] = builtins.list(self.inner.list(prefix))
        return iter(self._listed[prefix])


# -- versioned listing ---------------------------------------------------------------------------


class _BrokenVersions(BrokenStorage):
    """Offers a versioned listing over the inner store's (which must have one)."""

    requires = ("VersionedListing",)

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        assert isinstance(self.inner, VersionedListing), "wrap a store with a versioned listing"
        return iter([self.version(one) for one in self.inner.list_versions(prefix)])

    def version(self, listed: Listed) -> Listed:
        return listed


class StaleListedEtag(_BrokenVersions):
    """Lists each key with the first etag it ever listed for it (a cache never refreshed)."""

    promise = "versioned-listing"

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        self._first: dict[str, str] = {}

    def version(self, listed: Listed) -> Listed:
        return attrs.evolve(listed, etag=self._first.setdefault(listed.key, listed.etag))


class ListingTimeModified(_BrokenVersions):
    """Lists each key as modified when it was listed, by the reader's clock."""

    promise = "versioned-listing"

    def version(self, listed: Listed) -> Listed:
        return attrs.evolve(listed, modified=datetime.now(timezone.utc))


class NaiveModified(_BrokenVersions):
    """Lists modified times without a time zone (the reader's local time of the write)."""

    promise = "versioned-listing"

    def version(self, listed: Listed) -> Listed:
        return attrs.evolve(listed, modified=listed.modified.astimezone().replace(tzinfo=None))


class FirstPageVersions(_BrokenVersions):
    """Its listing comes in pages of 100 keys; ``list`` follows them, ``list_versions`` does
    not."""

    promise = "list-paging"
    list_page_size = 100

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        return itertools.islice(super().list_versions(prefix), self.list_page_size)


# -- conditional writes --------------------------------------------------------------------------


class OverwritingCreate(BrokenStorage):
    """Create overwrites an existing key instead of refusing it."""

    promise = "create-existing-refused"

    def create(self, key: str, data: bytes) -> str:
        current = self.inner.read(key)
        if current is None:
            return self.inner.create(key, data)
        return self.inner.replace(key, data, current.etag)


class CheckThenCreate(BrokenStorage):
    """Create checks that the key is absent, then writes it unconditionally: racers that all
    passed the check all win."""

    promise = "create-if-absent"

    def create(self, key: str, data: bytes) -> str:
        if self.inner.read(key) is not None:
            raise AlreadyExists(key, "already exists")
        time.sleep(RACE_WINDOW)
        try:
            return self.inner.create(key, data)
        except AlreadyExists:
            return _overwrite(self.inner, key, data)


class EtagBlindReplace(BrokenStorage):
    """Replace ignores the etag it is given and overwrites whatever is there."""

    promise = "stale-etag-refused"

    def replace(self, key: str, data: bytes, etag: str) -> str:
        return _overwrite(self.inner, key, data)


class CheckThenReplace(BrokenStorage):
    """Replace compares the etag, then writes unconditionally: writers that read the same
    version all win, and all but the last lose their update silently."""

    promise = "no-lost-updates"

    def replace(self, key: str, data: bytes, etag: str) -> str:
        check_precondition(key, self.inner.read(key), etag)
        time.sleep(RACE_WINDOW)
        return _overwrite(self.inner, key, data)


class EtagBlindDelete(BrokenStorage):
    """Delete ignores the etag it is given."""

    promise = "delete-if-match"

    def delete(self, key: str, etag: str | None = None) -> None:
        self.inner.delete(key)


class SameEtagAfterReplace(BrokenStorage):
    """Replace returns the etag it was given, not the new version's."""

    promise = "replace-etag"

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self.inner.replace(key, data, etag)
        return etag


class TornReplace(BrokenStorage):
    """Replace writes the first half of the value, then the whole: a reader can see half."""

    promise = "no-partial-reads"

    def replace(self, key: str, data: bytes, etag: str) -> str:
        half = self.inner.replace(key, data[: len(data) // 2], etag)
        time.sleep(RACE_WINDOW / 10)
        return self.inner.replace(key, data, half)


def _overwrite(store: Storage, key: str, data: bytes) -> str:
    """Replace whatever version ``key`` holds now: what an unconditional write amounts to."""
    while True:
        current = store.read(key)
        if current is None:
            raise NotFound(key, "does not exist")
        try:
            return store.replace(key, data, current.etag)
        except PreconditionFailed:
            continue


# -- reads ---------------------------------------------------------------------------------------


class StaleRead(BrokenStorage):
    """Caches every value it read or wrote and answers from the cache: another handle's
    writes stay unseen."""

    promise = "read-after-write"

    def __init__(self, inner: Storage) -> None:
        super().__init__(inner)
        self._cache: dict[str, Blob | None] = {}

    def read(self, key: str) -> Blob | None:
        if key not in self._cache:
            self._cache[key] = self.inner.read(key)
        return self._cache[key]

    def create(self, key: str, data: bytes) -> str:
        etag = self.inner.create(key, data)
        self._cache[key] = Blob(data, etag)
        return etag

    def replace(self, key: str, data: bytes, etag: str) -> str:
        new = self.inner.replace(key, data, etag)
        self._cache[key] = Blob(data, new)
        return new

    def delete(self, key: str, etag: str | None = None) -> None:
        self.inner.delete(key, etag)
        self._cache[key] = None


class UnboundedRead(BrokenStorage):
    """Offers a bounded read (``BoundedRead``) that ignores its bound."""

    promise = "size-bound"

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        return self.inner.read(key)


class CappedValues(BrokenStorage):
    """Keeps only the first 64 KiB of a value, silently."""

    promise = "large-payload"
    cap = 64 << 10

    def create(self, key: str, data: bytes) -> str:
        return self.inner.create(key, data[: self.cap])

    def replace(self, key: str, data: bytes, etag: str) -> str:
        return self.inner.replace(key, data[: self.cap], etag)


# -- keys ----------------------------------------------------------------------------------------


class _FoldingKeys(BrokenStorage):
    """Stores every key under a folded form, so keys that fold alike are one."""

    def fold(self, key: str) -> str:
        raise NotImplementedError

    def read(self, key: str) -> Blob | None:
        return self.inner.read(self.fold(validate_key(key)))

    def create(self, key: str, data: bytes) -> str:
        return self.inner.create(self.fold(validate_key(key)), data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        return self.inner.replace(self.fold(validate_key(key)), data, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self.inner.delete(self.fold(validate_key(key)), etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list(self.fold(validate_prefix(prefix)))


class CaseFoldingKeys(_FoldingKeys):
    """Keys are case-insensitive (``Key.json`` is ``key.json``), as on a default macOS or
    Windows file system or a database with a case-insensitive collation."""

    promise = "distinct-keys"

    def fold(self, key: str) -> str:
        return key.casefold()


class NormalisingKeys(_FoldingKeys):
    """Keys are normalised to Unicode NFC (``e`` + combining acute is ``é``)."""

    promise = "distinct-keys"

    def fold(self, key: str) -> str:
        return unicodedata.normalize("NFC", key)


class LaxKeys(BrokenStorage):
    """Reads an illegal key as absent instead of refusing it."""

    promise = "invalid-keys"

    def read(self, key: str) -> Blob | None:
        try:
            return self.inner.read(key)
        except InvalidKey:
            return None


#: Every broken store, each breaking one promise. The suite must fail every one.
BROKEN_STORES: tuple[type[BrokenStorage], ...] = (
    LikeListing,
    GlobListing,
    FolderListing,
    UnsortedListing,
    FirstPageListing,
    StaleList,
    StaleListedEtag,
    ListingTimeModified,
    NaiveModified,
    FirstPageVersions,
    OverwritingCreate,
    CheckThenCreate,
    EtagBlindReplace,
    CheckThenReplace,
    EtagBlindDelete,
    SameEtagAfterReplace,
    TornReplace,
    StaleRead,
    UnboundedRead,
    CappedValues,
    CaseFoldingKeys,
    NormalisingKeys,
    LaxKeys,
)


@attrs.frozen
class BrokenFactory:
    """Opens ``inner``'s store wrapped in ``kind``; picklable, as race workers need."""

    kind: type[BrokenStorage]
    inner: StorageFactory

    def __call__(self) -> Storage:
        return self.kind(self.inner())


def catch(ctx: ProbeContext, kind: type[BrokenStorage]) -> Observation:
    """Run the probe of ``kind.promise`` on ``ctx``'s store wrapped in ``kind``: it must fail."""
    probe = PROBES_BY_NAME[kind.promise]
    return probe(attrs.evolve(ctx, factory=BrokenFactory(kind, ctx.factory)))
