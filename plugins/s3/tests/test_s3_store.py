"""The S3 backend against the emulator: URLs and options, pages, bounds, the store's several
answers to a failed condition, and lost answers. Faults the emulator cannot give on demand
(a 409, a lost answer) are raised by wrapping the real client's call, after or instead of the
real request."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError
from fdcore_s3.location import parse_location
from fdcore_s3.plugin import S3Backend
from fdcore_s3.store import S3Storage
from fdcore_s3.testing import S3Emulator

from fdcore.abc import Blob, BoundedRead, ChangeCheck, StoreClock
from fdcore.errors import (
    AlreadyExists,
    ConfigError,
    NotFound,
    PreconditionFailed,
    StorageUnavailable,
    UnreadableFile,
)

pytestmark = pytest.mark.processes


@pytest.fixture
def store(environment_url: str, s3: S3Emulator) -> Iterator[S3Storage]:
    storage = S3Backend().open(environment_url, s3.options, create=False)  # writes nothing
    yield storage
    storage.close()


def conflict(status: int, code: str, operation: str = "PutObject") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": "scripted"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )


def wrap(
    store: S3Storage,
    operation: str,
    fault: Callable[[int, Callable[..., Any], dict[str, Any]], Any],
) -> list[int]:
    """Route ``operation`` of the store's client through ``fault(call_number, real, params)``."""
    client = store._client
    real = getattr(client, operation)
    calls: list[int] = []

    def call(**params: Any) -> Any:
        calls.append(len(calls) + 1)
        return fault(len(calls), real, params)

    setattr(client, operation, call)
    return calls


# -- URLs and options ------------------------------------------------------------------------


def test_url_gives_bucket_and_folder() -> None:
    location = parse_location("s3://my-bucket/teams/sales/", {"region": "eu-west-1"})
    assert (location.bucket, location.folder, location.region) == (
        "my-bucket",
        "teams/sales/",
        "eu-west-1",
    )
    assert parse_location("s3://my-bucket", {}).folder == ""
    assert S3Backend().accepts("s3://my-bucket/x") and not S3Backend().accepts("https://x/y")


@pytest.mark.parametrize(
    ("url", "options", "named"),
    [
        ("s3://B/x", {}, "bucket 'B'"),
        ("s3://ab/x", {}, "bucket 'ab'"),
        ("s3://bucket/a//b", {}, "folder 'a//b'"),
        ("s3://bucket/.hidden", {}, "folder '.hidden'"),
        ("s3://bucket/x?versionId=1", {}, "nothing else"),
        ("s3://bucket:90/x", {}, "nothing else"),
        ("s3://bucket/x", {"aws_secret_access_key": "s"}, "never read from agent.toml"),
        ("s3://bucket/x", {"session_token": "t"}, "never read from agent.toml"),
        ("s3://bucket/x", {"endpoint": "http://x"}, "unknown option"),
        ("s3://bucket/x", {"endpoint_url": "127.0.0.1:9000"}, "not an http(s) URL"),
        ("s3://bucket/x", {"addressing_style": "host"}, "not one of auto, path, virtual"),
    ],
)
def test_bad_url_or_option_is_one_line(url: str, options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        S3Backend().open(url, options)
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_endpoint_comes_from_aws_endpoint_url(
    environment_url: str, s3: S3Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``endpoint_url`` in [storage], boto3 reads AWS_ENDPOINT_URL as it always does."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint_url)
    storage = S3Backend().open(environment_url, {})
    try:
        storage.create("k.json", b"1")
        assert [*storage.list()] == ["k.json"]
    finally:
        storage.close()


def test_no_credentials_is_one_line_at_open(
    environment_url: str, s3: S3Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to ask for
    for create in (False, True):
        with pytest.raises(StorageUnavailable, match="no credentials in boto3's standard chain"):
            S3Backend().open(environment_url, s3.options, create=create)


def test_missing_bucket_is_unavailable_not_absent(s3: S3Emulator) -> None:
    for create in (False, True):
        with pytest.raises(StorageUnavailable, match="bucket 'no-such-bucket-here' does not exist"):
            S3Backend().open("s3://no-such-bucket-here/env", s3.options, create=create)
    storage = S3Storage(parse_location("s3://no-such-bucket-here/env", s3.options))
    with pytest.raises(StorageUnavailable, match="bucket 'no-such-bucket-here' does not exist"):
        storage.read("k.json")
    with pytest.raises(StorageUnavailable, match="does not exist"):
        storage.create("k.json", b"1")


def test_unreachable_store_is_unavailable_after_bounded_retries(environment_url: str) -> None:
    from fdcore.testing.servers import free_port

    location = parse_location(environment_url, {"endpoint_url": f"http://127.0.0.1:{free_port()}"})
    waits: list[float] = []
    storage = S3Storage(location, sleep=waits.append)
    with pytest.raises(StorageUnavailable, match="failed 6 times"):
        storage.read("k.json")
    assert len(waits) == 5


# -- listing, bounds, folders ----------------------------------------------------------------


def test_listing_pages_through_continuation_tokens(environment_url: str, s3: S3Emulator) -> None:
    storage = S3Storage(parse_location(environment_url, s3.options), list_page_size=3)
    try:
        keys = sorted(f"requests/r-{n:02d}.json" for n in range(10))
        for key in reversed(keys):
            storage.create(key, b"{}")
        storage.create("requestsX.json", b"{}")
        pages = wrap(storage, "list_objects_v2", lambda n, real, params: real(**params))
        assert [*storage.list("requests/")] == keys
        assert len(pages) == 4  # 3 + 3 + 3 + 1
    finally:
        storage.close()


def test_a_consoles_folder_marker_is_no_key(store: S3Storage, s3: S3Emulator) -> None:
    client = s3.client()
    client.put_object(
        Bucket=store.location.bucket, Key=store.location.folder + "requests/", Body=b""
    )
    client.close()
    store.create("requests/r.json", b"{}")
    assert [*store.list()] == ["requests/r.json"]


def test_bounded_read_reads_at_most_the_bound(store: S3Storage) -> None:
    assert isinstance(store, BoundedRead | ChangeCheck | StoreClock)
    store.create("big.json", b"x" * 1000)
    store.create("empty.json", b"")
    ranges: list[str | None] = []

    def record(n: int, real: Callable[..., Any], params: dict[str, Any]) -> Any:
        ranges.append(params.get("Range"))
        return real(**params)

    wrap(store, "get_object", record)
    with pytest.raises(UnreadableFile, match="is 1000 bytes, over the bound of 999"):
        store.read_bounded("big.json", 999)
    assert store.read_bounded("big.json", 1000) is not None
    assert store.read_bounded("empty.json", 10) == store.read("empty.json")
    assert store.read_bounded("absent.json", 10) is None
    # Ranged reads of one more byte than the bound; the empty object is read whole after 416.
    assert ranges == ["bytes=0-999", "bytes=0-1000", "bytes=0-10", None, None, "bytes=0-10"]


def test_store_clock_and_change_check(store: S3Storage) -> None:
    assert store.last_write_time() is None
    etag = store.create("k.json", b"1")
    assert store.last_write_time() is not None
    assert store.unchanged("k.json", etag)
    store.replace("k.json", b"2", etag)
    assert not store.unchanged("k.json", etag) and not store.unchanged("absent.json", etag)


# -- a failed condition, however the store says it -------------------------------------------


def test_409_on_create_of_an_existing_key_is_already_exists(store: S3Storage) -> None:
    store.create("k.json", b"1")

    def refuse(n: int, real: Callable[..., Any], params: dict[str, Any]) -> Any:
        raise conflict(409, "ConditionalRequestConflict")

    wrap(store, "put_object", refuse)
    with pytest.raises(AlreadyExists):
        store.create("k.json", b"2")


def test_409_while_the_condition_holds_is_retried(store: S3Storage) -> None:
    """AWS answers 409 ConditionalRequestConflict to a write racing another on the key; if the
    key is still absent (or still has our etag) nothing was decided, and the write is tried
    again."""
    store._sleep = lambda seconds: None

    def first_conflicts(n: int, real: Callable[..., Any], params: dict[str, Any]) -> Any:
        if n == 1:
            raise conflict(409, "ConditionalRequestConflict")
        return real(**params)

    calls = wrap(store, "put_object", first_conflicts)
    etag = store.create("k.json", b"1")
    calls.clear()
    new = store.replace("k.json", b"2", etag)
    assert store.read("k.json") == Blob(b"2", new)
    assert len(calls) == 2


def test_replace_refusals(store: S3Storage) -> None:
    etag = store.create("k.json", b"1")
    store.replace("k.json", b"2", etag)
    with pytest.raises(PreconditionFailed, match="is stale"):
        store.replace("k.json", b"3", etag)
    with pytest.raises(NotFound):
        store.replace("absent.json", b"3", etag)
    with pytest.raises(PreconditionFailed):
        store.delete("k.json", etag)
    with pytest.raises(NotFound):
        store.delete("absent.json")
    with pytest.raises(NotFound):
        store.delete("absent.json", etag)


def test_a_lost_answer_to_our_own_write_is_not_a_conflict(store: S3Storage) -> None:
    """The write landed, its answer was lost, the retry meets a failed condition: the write id
    in the object's metadata shows it is ours, so create and replace report success."""
    store._sleep = lambda seconds: None

    def landed_then_lost(n: int, real: Callable[..., Any], params: dict[str, Any]) -> Any:
        result = real(**params)
        if n == 1:
            raise ConnectionClosedError(endpoint_url="http://127.0.0.1")
        return result

    calls = wrap(store, "put_object", landed_then_lost)
    etag = store.create("k.json", b"1")
    assert store.read("k.json") == Blob(b"1", etag)
    assert len(calls) == 2
    calls.clear()
    new = store.replace("k.json", b"2", etag)
    assert store.read("k.json") == Blob(b"2", new)
    assert len(calls) == 2
    # Someone else's object is still a conflict.
    other = S3Storage(store.location)
    try:
        with pytest.raises(AlreadyExists):
            other.create("k.json", b"3")
    finally:
        other.close()


def test_keys_live_under_the_folder(store: S3Storage, s3: S3Emulator) -> None:
    store.create("a/b.json", b"1")
    client = s3.client()
    listed = client.list_objects_v2(Bucket=store.location.bucket, Prefix=store.location.folder)
    client.close()
    folder = store.location.folder
    keys = [item["Key"] for item in listed["Contents"]]
    assert keys == [folder + ".fdcore/environment.json", folder + "a/b.json"]
    assert list(store.list()) == ["a/b.json"]  # the environment's marker is no mailbox key
