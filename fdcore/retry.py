"""What the storage backends behind a network share: how they retry a transient failure
(:class:`RetryPolicy`) and how they settle a conditional write the service refused.

Public, for backend authors (fdcore-onelake and fdcore-s3 use it): the number of tries, their
spacing and the network timeouts, in one value a backend's tests can shorten; the loop that
tries; and the decisions after a refusal, from the version a metadata request (HEAD) finds.
Every write carries a random write id in its metadata, so a retried write whose first try
landed, but whose answer was lost, knows the version it meets for its own.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import TypeVar

import attrs

from fdcore.errors import (
    AlreadyExists,
    NotFound,
    PreconditionFailed,
    StorageError,
    StorageUnavailable,
)

__all__ = [
    "TRANSIENT_STATUS",
    "WRITE_ID",
    "Failure",
    "RetryPolicy",
    "StoredVersion",
    "TryAgain",
    "holds",
    "new_write_id",
    "refused_create",
    "refused_delete",
    "refused_replace",
]

T = TypeVar("T")


@attrs.frozen
class Failure:
    """One try's transient failure, as a backend reads its client's error."""

    problem: str  # one line, for the error raised after the last try
    maybe_landed: bool  # the request may have reached the service
    retry_after: float | None = None  # seconds the service asked for, if it did


class TryAgain(Exception):
    """A try's refused condition still holds (nothing was decided): try once more."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@attrs.frozen
class RetryPolicy:
    """How often and how far apart a transient failure is retried.

    The default gives up after 6 tries spread over about 3-6 seconds: long enough to ride out a
    throttling burst or a dropped connection, short enough for an agent's poll to report it.
    """

    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 3.0
    connection_timeout: float = 5.0  # seconds to open a connection
    read_timeout: float = 30.0  # seconds without a byte of answer

    def delay(self, failures: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after ``failures`` failed tries: half fixed, half random ("equal
        jitter"), so racing agents spread out yet each waits at least half the back-off."""
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (failures - 1))
        wait = backoff / 2 + rng.uniform(0, backoff / 2)
        if retry_after is not None:  # the service asked for a pause; honour it within our cap
            wait = max(wait, min(retry_after, self.max_delay))
        return wait

    def run(
        self,
        attempt: Callable[[bool], T],
        transient: Callable[[str, str | None, Exception], Failure | None],
        what: str,
        key: str | None,
        where: str,
        sleep: Callable[[float], None],
        rng: random.Random,
    ) -> T:
        """Call ``attempt(maybe_landed)`` until it returns, at most :attr:`attempts` times.

        ``transient(what, key, error)`` reads an error a try raised: a :class:`Failure` to
        retry, None for one to raise as it is (or it raises the error to report itself). A
        :class:`TryAgain` is retried. ``maybe_landed`` is true once an earlier try failed after
        its request may have reached the service. After the last try: StorageUnavailable
        naming ``what``, ``where`` and the last failure.
        """
        maybe_landed = False
        problem = ""
        for tries in range(1, self.attempts + 1):
            try:
                return attempt(maybe_landed)
            except TryAgain as again:
                failure = Failure(again.problem, True)
            except Exception as exc:
                retry = transient(what, key, exc)
                if retry is None:
                    raise
                failure = retry
            problem = failure.problem
            maybe_landed = maybe_landed or failure.maybe_landed
            if tries < self.attempts:
                sleep(self.delay(tries, failure.retry_after, rng))
        raise StorageUnavailable(
            key, f"{what} on {where} failed {self.attempts} times; last: {problem}"
        )


# -- a refused conditional write ----------------------------------------------------------------


@attrs.frozen
class StoredVersion:
    """A key's current version as a metadata request tells it: its etag, and the write id its
    writer put in its metadata (None for a version written without one)."""

    etag: str
    write_id: str | None


#: The metadata key that names the write that produced a version (its ``new_write_id``): what
#: tells a retried write that landed from another writer's.
WRITE_ID = "fdcorewrite"
#: HTTP statuses a store behind a network answers when trying again may succeed.
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def new_write_id(key: str, data: bytes, max_bytes: int) -> str:
    """A new write's id, for its metadata; a value over ``max_bytes`` is a StorageError."""
    if len(data) > max_bytes:
        raise StorageError(key, f"value of {len(data)} bytes exceeds {max_bytes} bytes")
    return uuid.uuid4().hex


def holds(current: StoredVersion | None, etag: str) -> bool:
    """Whether the version found is the one named ``etag`` (a change check)."""
    return current is not None and current.etag == etag


def refused_create(key: str, write_id: str, current: StoredVersion | None, refusal: str) -> str:
    """Settle a create refused as existing, from the version found after the refusal: our own
    earlier try (it landed, its answer was lost) gives its etag; a key that is absent after all
    was refused for a write in flight, and is tried again; else AlreadyExists."""
    if current is None:
        raise TryAgain(refusal)
    if current.write_id == write_id:
        return current.etag
    raise AlreadyExists(key, "already exists")


def refused_replace(
    key: str, etag: str, write_id: str, current: StoredVersion | None, refusal: str
) -> str:
    """Settle a replace refused on its etag: NotFound, our own earlier try's etag, a retry when
    the key still holds ``etag`` (refused for a conflicting write: nothing was written), else
    PreconditionFailed."""
    if current is None:
        raise NotFound(key, "does not exist")
    if current.write_id == write_id:
        return current.etag
    if current.etag == etag:
        raise TryAgain(refusal)
    raise PreconditionFailed(key, f"etag {etag} is stale (now {current.etag})")


def refused_delete(
    key: str, etag: str | None, maybe_landed: bool, current: StoredVersion | None, refusal: str
) -> None:
    """Settle a delete refused on its etag (or as absent): gone after an earlier try that may
    have landed is done; gone otherwise is NotFound; a retry when the key still holds ``etag``;
    else PreconditionFailed."""
    if current is None:
        if maybe_landed:
            return  # an earlier try whose answer was lost most likely removed it
        raise NotFound(key, "does not exist")
    if current.etag == etag:
        raise TryAgain(refusal)
    raise PreconditionFailed(key, f"etag {etag} is stale (now {current.etag})")
