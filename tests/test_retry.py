"""fdcore.retry: the retry loop and the settling of a refused write that both network stores use
(their own tests run them against Azurite and moto; these pin the decisions for a vendor)."""

from __future__ import annotations

import random

import pytest

from fdcore.errors import (
    AlreadyExists,
    NotFound,
    PreconditionFailed,
    StorageError,
    StorageUnavailable,
)
from fdcore.retry import (
    Failure,
    RetryPolicy,
    StoredVersion,
    TryAgain,
    new_write_id,
    refused_create,
    refused_delete,
    refused_replace,
)

pytestmark = pytest.mark.processes

OURS, THEIRS = "w-ours", "w-theirs"


def test_a_refused_create_is_ours_if_the_version_there_is_our_write() -> None:
    assert refused_create("k", OURS, StoredVersion('"e1"', OURS), "412") == '"e1"'
    with pytest.raises(AlreadyExists):
        refused_create("k", OURS, StoredVersion('"e1"', THEIRS), "412")
    with pytest.raises(TryAgain, match="409"):  # refused, yet absent: a write in flight
        refused_create("k", OURS, None, "409")


def test_a_refused_replace() -> None:
    assert refused_replace("k", '"e0"', OURS, StoredVersion('"e1"', OURS), "412") == '"e1"'
    with pytest.raises(PreconditionFailed, match='etag "e0" is stale'):
        refused_replace("k", '"e0"', OURS, StoredVersion('"e1"', THEIRS), "412")
    with pytest.raises(TryAgain):  # still holds the etag sent: nothing was written
        refused_replace("k", '"e0"', OURS, StoredVersion('"e0"', THEIRS), "409")
    with pytest.raises(NotFound):
        refused_replace("k", '"e0"', OURS, None, "412")


def test_a_refused_delete() -> None:
    refused_delete("k", '"e0"', True, None, "412")  # gone after a try that may have landed
    with pytest.raises(NotFound):
        refused_delete("k", '"e0"', False, None, "412")
    with pytest.raises(PreconditionFailed):
        refused_delete("k", '"e0"', False, StoredVersion('"e1"', None), "412")
    with pytest.raises(TryAgain):
        refused_delete("k", '"e0"', False, StoredVersion('"e0"', None), "409")


def test_a_value_over_the_limit_gets_no_write_id() -> None:
    assert new_write_id("k", b"x" * 4, 4) != new_write_id("k", b"x" * 4, 4)
    with pytest.raises(StorageError, match="value of 5 bytes exceeds 4 bytes"):
        new_write_id("k", b"x" * 5, 4)


def test_the_loop_retries_what_is_transient_and_tells_the_try_what_may_have_landed() -> None:
    seen: list[bool] = []
    slept: list[float] = []

    def attempt(maybe_landed: bool) -> str:
        seen.append(maybe_landed)
        if len(seen) == 1:
            raise ConnectionRefusedError("never sent")
        if len(seen) == 2:
            raise TimeoutError("answer lost")
        if len(seen) == 3:
            raise TryAgain("409 while the condition held")
        return "done"

    def transient(what: str, key: str | None, exc: Exception) -> Failure | None:
        if isinstance(exc, ConnectionRefusedError):
            return Failure(str(exc), maybe_landed=False)
        if isinstance(exc, TimeoutError):
            return Failure(str(exc), maybe_landed=True, retry_after=2.0)
        return None

    policy = RetryPolicy(attempts=4, max_delay=5.0)
    result = policy.run(attempt, transient, "create", "k", "here", slept.append, random.Random(1))
    assert result == "done"
    assert seen == [False, False, True, True]
    assert len(slept) == 3 and slept[1] >= 2.0  # the service's Retry-After, within the cap


def test_the_loop_gives_up_naming_the_last_failure_and_raises_other_errors_at_once() -> None:
    def lost(maybe_landed: bool) -> str:
        raise TimeoutError("answer lost")

    def transient(what: str, key: str | None, exc: Exception) -> Failure | None:
        return Failure(str(exc), True) if isinstance(exc, TimeoutError) else None

    policy = RetryPolicy(attempts=3)
    with pytest.raises(StorageUnavailable, match="create on here failed 3 times; last: answer"):
        policy.run(lost, transient, "create", "k", "here", lambda _: None, random.Random(1))

    def exists(maybe_landed: bool) -> str:
        raise AlreadyExists("k", "already exists")

    tries = []
    with pytest.raises(AlreadyExists):
        policy.run(
            lambda landed: tries.append(landed) or exists(landed),
            transient,
            "create",
            "k",
            "here",
            lambda _: None,
            random.Random(1),
        )
    assert tries == [False]
