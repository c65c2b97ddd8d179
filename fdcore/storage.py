"""The storage protocol every backend implements, and its typed errors.

A mailbox needs only five operations from a store. Two of them are conditional writes, and the
whole product rests on them:

* :meth:`Storage.create` is create-if-absent (``If-None-Match: *``): of many writers racing on one
  key exactly one succeeds, the others get :class:`AlreadyExists`.
* :meth:`Storage.replace` is replace-if-unchanged (``If-Match: <etag>``): of many writers holding
  the same etag exactly one succeeds, the others get :class:`PreconditionFailed`.

Keys are ``/``-separated relative paths such as ``requests/r-1.json``. A reader never sees a
partially written value: a value is either absent or complete.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import attrs

MAX_KEY_LENGTH = 1024


class StorageError(Exception):
    """Base of the storage errors; ``key`` names the object concerned, if any."""

    def __init__(self, key: str | None, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class AlreadyExists(StorageError):
    """create-if-absent found the key already present."""


class PreconditionFailed(StorageError):
    """replace or delete found a different etag (someone else changed the object)."""


class NotFound(StorageError):
    """The object does not exist (replace or delete of an absent key)."""


class StorageUnavailable(StorageError):
    """A transient failure: the store could not be reached or answered with a retryable error.

    The operation may or may not have taken effect; callers re-read before deciding.
    """


class InvalidKey(StorageError, ValueError):
    """A key is not a legal relative path."""


@attrs.frozen
class Blob:
    """What a read returns: the complete bytes and the etag naming this version."""

    data: bytes
    etag: str


@runtime_checkable
class Storage(Protocol):
    """One environment's storage, as a backend opens it for a URL."""

    url: str

    def read(self, key: str) -> Blob | None:
        """Return the object's bytes and etag, or ``None`` when it does not exist."""

    def create(self, key: str, data: bytes) -> str:
        """Create ``key`` only if absent; return its etag. Raise :class:`AlreadyExists`."""

    def replace(self, key: str, data: bytes, etag: str) -> str:
        """Replace ``key`` only if its etag is ``etag``; return the new etag.

        Raise :class:`PreconditionFailed` on a different etag, :class:`NotFound` if absent.
        """

    def delete(self, key: str, etag: str | None = None) -> None:
        """Delete ``key`` (only if its etag is ``etag`` when given).

        Raise :class:`NotFound` if absent, :class:`PreconditionFailed` on a different etag.
        """

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key that starts with ``prefix``, in lexicographic order."""

    def close(self) -> None:
        """Release connections and handles. The store is not used afterwards."""


def check_precondition(key: str, current: Blob | None, etag: str | None) -> Blob:
    """What replace and delete check first, the same in every backend that compares etags."""
    if current is None:
        raise NotFound(key, "does not exist")
    if etag is not None and current.etag != etag:
        raise PreconditionFailed(key, f"etag {etag} is stale (now {current.etag})")
    return current


def validate_key(key: str) -> str:
    """Return ``key`` if it is a legal relative path for every backend, else raise InvalidKey.

    Segments are non-empty, never ``.``/``..``, never start with ``.`` (backends keep their own
    scratch files under dot names), and hold no control characters or backslashes.
    """
    if not isinstance(key, str) or not key:
        raise InvalidKey(None, f"invalid key {key!r}: must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(None, f"invalid key {key[:40]!r}...: longer than {MAX_KEY_LENGTH}")
    for segment in key.split("/"):
        if not segment or segment.startswith("."):
            raise InvalidKey(None, f"invalid key {key!r}: empty or dot-prefixed path segment")
        if any(ord(ch) < 32 or ch in "\\\x7f" for ch in segment):
            raise InvalidKey(None, f"invalid key {key!r}: control character or backslash")
    return key


def validate_prefix(prefix: str) -> str:
    """A list prefix is a key prefix: empty, or a key possibly ending in ``/``."""
    if prefix:
        validate_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


@runtime_checkable
class StorageBackend(Protocol):
    """A storage plugin's implementation, as returned by ``fdcore_storage_backends``."""

    #: The name operators see in ``fdcore plugins`` and may put in ``[agent] storage``.
    name: str

    def accepts(self, url: str) -> bool:
        """Whether this backend serves environment URLs like ``url`` (no I/O)."""

    def open(self, url: str, options: dict[str, str]) -> Storage:
        """Open the environment at ``url``. ``options`` come from ``[storage]`` in agent.toml.

        Raise :class:`fdcore.errors.ConfigError` for a URL or option it cannot use.
        """
