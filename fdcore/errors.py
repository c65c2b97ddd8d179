"""Errors a user meets: each renders as one line that says what was wrong and where."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

__all__ = [
    "AlreadyExists",
    "ArchiveConflict",
    "ConfigError",
    "DuplicateAgent",
    "DurationError",
    "EnvironmentClosed",
    "EnvironmentNotFound",
    "EnvironmentUnusable",
    "FdcoreError",
    "FileTooLarge",
    "InvalidId",
    "InvalidKey",
    "LeaseLost",
    "MailboxFileError",
    "NotFound",
    "PluginError",
    "PreconditionFailed",
    "RequestCancelled",
    "RequestDidNotSucceed",
    "RequestError",
    "RequestExpired",
    "RequestFailed",
    "RequestNotFound",
    "StaleFencingToken",
    "StorageError",
    "StorageUnavailable",
    "UnknownRequest",
    "UnreadableFile",
    "WaitTimedOut",
]


class FdcoreError(Exception):
    """Base of every error fdcore raises on purpose; its str() is a complete one-line message."""


class ConfigError(FdcoreError):
    """A configuration file or value is wrong: names the file and the key."""

    def __init__(self, source: str, key: str | None, message: str) -> None:
        self.source = source
        self.key = key
        self.message = message  # what is wrong, without where
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {message}")

    @classmethod
    def unknown_key(
        cls, source: str, key: str, name: str, known: Sequence[str], what: str = "unknown key"
    ) -> ConfigError:
        """``name`` (at ``key``) is none of ``known``: say the closest, or list them all."""
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
        return cls(source, key, f"{what}{hint}")


class MailboxFileError(FdcoreError):
    """A file read from the mailbox is malformed: names the file and the field."""

    def __init__(self, path: str, field: str | None, message: str) -> None:
        self.path = path
        self.field = field
        where = f"{path}: field '{field}'" if field else path
        super().__init__(f"{where}: {message}")


class FileTooLarge(FdcoreError):
    """A mailbox file was not written: it would be larger than the bound its readers read
    (``max_file_bytes``), so they would skip it as unreadable. Nothing was written."""

    def __init__(self, path: str, size: int, bound: int) -> None:
        self.path, self.size, self.bound = path, size, bound
        super().__init__(
            f"{path}: not written: {size} bytes, over the bound of {bound} bytes its readers "
            "read (max_file_bytes)"
        )


class UnreadableFile(MailboxFileError):
    """A key holds something a store does not read as a mailbox file: a FIFO, a device, a
    symbolic link, a folder, or more bytes than the size bound. Reported and skipped like any
    malformed file, never read."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, None, message)


class InvalidId(FdcoreError, ValueError):
    """An id that would become a file name does not match the allowed pattern."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class PluginError(FdcoreError):
    """A plugin failed to load, or no installed plugin provides what was asked for."""


# -- storage: raised by every backend's Storage methods ---------------------------------------


class StorageError(FdcoreError):
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


class EnvironmentNotFound(StorageError):
    """Opening without creating (``create=False``) found no environment at the URL."""

    def __init__(self, url: str, detail: str | None = None) -> None:
        self.url = url
        where = f"{url} ({detail})" if detail else url
        super().__init__(
            None,
            f"environment not found: {where}; `fdcore init {url}` creates it "
            "(or an agent with `[agent] create = true`)",
        )


class EnvironmentUnusable(StorageError):
    """The environment's place exists but cannot hold one: a file where its folder belongs, or
    no permission. Unlike StorageUnavailable, retrying does not help: someone must fix it."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        super().__init__(None, f"cannot use environment {url}: {reason}")


# -- leases and fencing ------------------------------------------------------------------------


class LeaseLost(FdcoreError):
    """The lease is no longer held by the caller (expired and taken, or replaced)."""


class StaleFencingToken(FdcoreError):
    """A write carried a token older than the table's current lease or last write."""


# -- retention ---------------------------------------------------------------------------------


class ArchiveConflict(FdcoreError):
    """Retention left a finished request live for now: one of its files changed while it was
    being moved, or it has more run records than one move reads."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


# -- agents ------------------------------------------------------------------------------------


class DuplicateAgent(FdcoreError):
    """Another live process runs under this agent's name."""


# -- values written as text -----------------------------------------------------------------------


class DurationError(FdcoreError, ValueError):
    """A duration text that cannot be read; ``reason`` says why without repeating the text."""

    def __init__(self, text: object, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"duration {text!r}: {reason}")


# -- operator actions on requests -----------------------------------------------------------------


class RequestError(FdcoreError):
    """A request cannot be acted on as asked (cancel, retry): names the request and why."""


class RequestNotFound(RequestError, LookupError):
    """No request of that id is in the environment, live or archived by retention."""

    def __init__(self, request_id: str, where: str | None = None) -> None:
        self.request_id = request_id
        super().__init__(f"request {request_id!r} not found" + (f" in {where}" if where else ""))


#: The name of :class:`RequestNotFound` before the public API (one class, two names).
UnknownRequest = RequestNotFound


# -- waiting for a request to end (fdcore.environment's ``wait``) ------------------------------
#
# ``story`` is the request's :class:`fdcore.environment.RequestStory` as the wait last read it.
# It is typed ``Any`` here: this module is the lowest layer and may not import the views.


def _one_line(text: str) -> str:
    return " ".join(text.split())


class RequestDidNotSucceed(FdcoreError):
    """The request ended, but not ``succeeded``: the base of :class:`RequestFailed`,
    :class:`RequestExpired` and :class:`RequestCancelled`. ``state`` is its final state,
    ``story`` its whole story (a :class:`fdcore.environment.RequestStory`)."""

    def __init__(self, request_id: str, state: str, story: Any, why: str | None = None) -> None:
        self.request_id = request_id
        self.state = state
        self.story = story
        super().__init__(f"request {request_id} {state}" + (f": {_one_line(why)}" if why else ""))


class RequestFailed(RequestDidNotSucceed):
    """The request ended ``failed``; its story names the failed table and its output tail."""


class RequestExpired(RequestDidNotSucceed):
    """The request ended ``expired``: its deadline passed (or its attempts ran out)."""


class RequestCancelled(RequestDidNotSucceed):
    """The request ended ``cancelled`` (``fdcore cancel``)."""


class WaitTimedOut(FdcoreError, TimeoutError):
    """The wait gave up after ``timeout`` seconds; the request goes on. ``story`` is its story
    as last read (a :class:`fdcore.environment.RequestStory`), ``state`` its state then."""

    def __init__(self, request_id: str, timeout: float, state: str, story: Any) -> None:
        self.request_id = request_id
        self.timeout = timeout
        self.state = state
        self.story = story
        super().__init__(
            f"request {request_id} still {state} after waiting {timeout:g}s; it goes on"
        )


class EnvironmentClosed(FdcoreError):
    """The environment was closed while a wait waited on it (or before the wait began); the
    request goes on. ``story`` is its story as last read (a
    :class:`fdcore.environment.RequestStory`, None if none could be read), ``state`` its state
    then."""

    def __init__(self, request_id: str, state: str, story: Any) -> None:
        self.request_id = request_id
        self.state = state
        self.story = story
        super().__init__(
            f"stopped waiting for request {request_id} ({state}): the environment was closed;"
            " the request goes on"
        )
