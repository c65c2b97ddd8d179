"""A mailbox in a folder of an S3 bucket (or of a store that speaks S3), through boto3.

* create-if-absent is one ``PutObject`` with ``If-None-Match: *``; replace-if-unchanged is one
  ``PutObject`` with ``If-Match: <etag>``; a conditional delete is ``DeleteObject`` with
  ``If-Match``. A PutObject is atomic: a reader sees the old object or the new one.
* A failed condition is 412 on AWS and most stores; some answer 409 (a conflicting write in
  flight, AWS's ``ConditionalRequestConflict``). Either way one ``HeadObject`` decides what
  happened: the key exists (AlreadyExists), holds another etag (PreconditionFailed), is absent
  (NotFound), or still holds the etag we sent, and the request is tried again.
* Transient failures (5xx, 408, 429, ``SlowDown``, timeouts, refused or reset connections) are
  retried here with capped exponential back-off and jitter, then raised as StorageUnavailable;
  botocore's own retries are off so the number and spacing of tries is ours and bounded.
* A retried write whose first try landed but whose answer was lost would meet its own write as a
  failed condition. Every write carries a random write id in its metadata, and a retry that
  meets a failed condition asks (``HeadObject``) whether the object now there is this very write.
"""

from __future__ import annotations

import builtins
import logging
import random
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
)

from fdcore.abc import (
    ENVIRONMENT_MARKER,
    MARKER_CONTENT,
    Blob,
    Listed,
    validate_key,
    validate_prefix,
)
from fdcore.errors import InvalidKey, NotFound, StorageError, StorageUnavailable, UnreadableFile
from fdcore.retry import (
    TRANSIENT_STATUS,
    WRITE_ID,
    Failure,
    RetryPolicy,
    StoredVersion,
    holds,
    new_write_id,
    refused_create,
    refused_delete,
    refused_replace,
)
from fdcore_s3.location import Location

T = TypeVar("T")

# botocore logs "Found credentials in ..." at INFO for every client, and every process of an
# agent or of `fdcore doctor` makes one: keep that logger to warnings unless the operator has
# set its level themselves.
_credentials_log = logging.getLogger("botocore.credentials")
if _credentials_log.level == logging.NOTSET:
    _credentials_log.setLevel(logging.WARNING)

MAX_VALUE_BYTES = 64 << 20  # far above any mailbox file; far below S3's 5 GiB PutObject
MAX_OBJECT_KEY = 1024  # S3's limit on a key, in UTF-8 bytes, folder included
LIST_PAGE_SIZE = 1000  # ListObjectsV2's largest page
CONDITION_FAILED = frozenset({409, 412})
TRANSIENT_CODES = frozenset({"SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable"})
MISSING_KEY = frozenset({"NoSuchKey", "404", "NotFound"})


def make_client(location: Location, retry: RetryPolicy) -> Any:
    """A boto3 S3 client on boto3's standard credential chain (profile, if one is named)."""
    session = boto3.session.Session(profile_name=location.profile)
    config = Config(
        connect_timeout=retry.connection_timeout,
        read_timeout=retry.read_timeout,
        retries={"total_max_attempts": 1},  # our loop retries; botocore's would multiply
        s3={"addressing_style": location.addressing_style},
        # Checksums only where S3 requires them: several S3-compatible stores refuse the
        # CRC32 trailers botocore >= 1.36 sends by default.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        max_pool_connections=32,
    )
    # endpoint_url None: boto3 reads AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL itself.
    return session.client(
        "s3", endpoint_url=location.endpoint_url, region_name=location.region, config=config
    )


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or "")


def _describe(exc: Exception) -> str:
    """One line about a boto error: status and code, never headers or secrets."""
    if isinstance(exc, ClientError):
        message = exc.response.get("Error", {}).get("Message") or "no message"
        return f"HTTP {_status(exc)} {_code(exc)} ({message})"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else 'no detail'}"


def _server_time(response: dict[str, Any]) -> datetime | None:
    """The store's clock from an answer's ``Date`` header (PutObject returns no Last-Modified)."""
    value = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        return parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None


def _utc(stamp: datetime) -> datetime:
    """A listed time in UTC (botocore's are aware; a naive one is taken as UTC)."""
    return (
        stamp.replace(tzinfo=timezone.utc)
        if stamp.tzinfo is None
        else stamp.astimezone(timezone.utc)
    )


class S3Storage:
    """The :class:`fdcore.abc.Storage` protocol over one folder of an S3 bucket, with the
    optional :class:`~fdcore.abc.BoundedRead`, :class:`~fdcore.abc.ChangeCheck`,
    :class:`~fdcore.abc.StoreClock` and :class:`~fdcore.abc.VersionedListing`."""

    def __init__(
        self,
        location: Location,
        retry: RetryPolicy | None = None,
        *,
        list_page_size: int = LIST_PAGE_SIZE,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = location.url
        self.location = location
        self.retry = retry or RetryPolicy()
        self.list_page_size = list_page_size
        self.clock_resolution = 1.0  # HTTP dates have whole seconds (fdcore.abc.StoreClock)
        self._sleep = sleep
        self._rng = random.Random()
        self._write_time: datetime | None = None
        self._client: Any = make_client(location, self.retry)
        endpoint = location.endpoint_url or "boto3's endpoint"
        self._where = f"{location.url} ({endpoint})"

    # -- helpers -------------------------------------------------------------------------------

    def _name(self, key: str) -> str:
        name = self.location.object_key(validate_key(key))
        if len(name.encode()) > MAX_OBJECT_KEY:
            raise InvalidKey(key, f"object key with the folder exceeds {MAX_OBJECT_KEY} bytes")
        return name

    def _call(self, operation: str, **params: Any) -> Any:
        return getattr(self._client, operation)(Bucket=self.location.bucket, **params)

    def _run(self, what: str, key: str | None, attempt: Callable[[bool], T]) -> T:
        """Call ``attempt(maybe_landed)`` until it returns, retrying transient failures."""
        where, sleep, rng = self._where, self._sleep, self._rng
        return self.retry.run(attempt, self._transient, what, key, where, sleep, rng)

    def _transient(self, what: str, key: str | None, exc: Exception) -> Failure | None:
        """A failure worth another try; raise the error an unusable store is; None otherwise."""
        if isinstance(exc, NoCredentialsError):
            raise StorageUnavailable(
                key,
                f"{what} on {self._where}: no credentials in boto3's standard chain "
                "(set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or a role)",
            ) from None
        if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError)):  # never sent
            problem = f"{_describe(exc)} (is endpoint_url right, and the store up?)"
            return Failure(problem, maybe_landed=False)
        if isinstance(exc, ClientError):
            if _status(exc) not in TRANSIENT_STATUS and _code(exc) not in TRANSIENT_CODES:
                raise self._unusable(what, key, exc) from None
            return Failure(_describe(exc), maybe_landed=True)
        if isinstance(exc, BotoCoreError):  # an answer lost, or any other transport failure
            return Failure(_describe(exc), maybe_landed=True)
        return None

    def _unusable(self, what: str, key: str | None, exc: ClientError) -> StorageError:
        if _code(exc) == "NoSuchBucket":
            hint = f"bucket {self.location.bucket!r} does not exist"
        elif _status(exc) in (401, 403):
            hint = "access denied (docs/s3.md lists the permissions an agent needs)"
        else:
            hint = "refused by the store"
        return StorageUnavailable(key, f"{what} on {self._where}: {hint}: {_describe(exc)}")

    def _version(self, name: str) -> StoredVersion | None:
        """The current object's etag and write id, or None if there is none (one HEAD)."""
        try:
            head = self._call("head_object", Key=name)
        except ClientError as exc:
            if _status(exc) == 404:  # a HEAD answer has no body: no code tells key from bucket
                return None
            raise
        return StoredVersion(str(head["ETag"]), (head.get("Metadata") or {}).get(WRITE_ID))

    def _put(self, name: str, data: bytes, write_id: str, **condition: str) -> str:
        response = self._call(
            "put_object", Key=name, Body=data, Metadata={WRITE_ID: write_id}, **condition
        )
        self._write_time = _server_time(response) or self._write_time
        return str(response["ETag"])

    def _get(self, name: str, max_bytes: int | None) -> tuple[bytes, str, int] | None:
        """The object's first ``max_bytes + 1`` bytes (all, if None), etag and whole size."""
        params: dict[str, Any] = {"Key": name}
        if max_bytes is not None:
            params["Range"] = f"bytes=0-{max_bytes}"
        try:
            response = self._call("get_object", **params)
        except ClientError as exc:
            if _code(exc) in MISSING_KEY:
                return None
            if _status(exc) != 416:  # a range of an empty object is refused: read it whole
                raise
            response = self._call("get_object", Key=name)
        body = response["Body"]
        try:
            # A store that ignores Range sends everything: read no more than the bound anyway.
            data = body.read() if max_bytes is None else body.read(max_bytes + 1)
        finally:
            body.close()
        total = str(response.get("ContentRange") or "").rpartition("/")[2]
        size = int(total) if total.isdigit() else int(response.get("ContentLength") or len(data))
        return data, str(response["ETag"]), max(size, len(data))

    # -- the environment's marker ----------------------------------------------------------

    def is_environment(self) -> bool:
        """Whether ``fdcore init`` marked this folder (one listing of the marker's key: unlike a
        HEAD, its refusal tells a missing bucket from a missing key)."""
        name = self.location.object_key(ENVIRONMENT_MARKER)

        def attempt(_: bool) -> bool:
            page = self._call("list_objects_v2", Prefix=name, MaxKeys=1)
            return any(item["Key"] == name for item in page.get("Contents", ()))

        return self._run("open", None, attempt)

    def mark_environment(self) -> None:
        """Write the marker unless it is there (create-if-absent: racing inits are both fine)."""
        name = self.location.object_key(ENVIRONMENT_MARKER)

        def attempt(_: bool) -> None:
            try:
                self._put(name, MARKER_CONTENT, "marker", IfNoneMatch="*")
            except ClientError as exc:
                if _status(exc) not in CONDITION_FAILED:
                    raise

        self._run("mark the environment", None, attempt)

    # -- the protocol --------------------------------------------------------------------------

    def read(self, key: str) -> Blob | None:
        name = self._name(key)

        def attempt(_: bool) -> Blob | None:
            found = self._get(name, None)
            return None if found is None else Blob(found[0], found[1])

        return self._run("read", key, attempt)

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        """:class:`fdcore.abc.BoundedRead`: never more than ``max_bytes`` (and one) downloaded;
        a bigger object is an :class:`UnreadableFile` whatever its size."""
        name = self._name(key)

        def attempt(_: bool) -> Blob | None:
            found = self._get(name, max_bytes)
            if found is None:
                return None
            data, etag, size = found
            if size > max_bytes:
                raise UnreadableFile(
                    key, f"is {size} bytes, over the bound of {max_bytes}: not read"
                )
            return Blob(data, etag)

        return self._run("read", key, attempt)

    def unchanged(self, key: str, etag: str) -> bool:
        """:class:`fdcore.abc.ChangeCheck`: one HEAD instead of a download."""
        name = self._name(key)
        return self._run("read", key, lambda _: holds(self._version(name), etag))

    def last_write_time(self) -> datetime | None:
        """:class:`fdcore.abc.StoreClock`: the ``Date`` of the store's answer to our last write."""
        return self._write_time

    def create(self, key: str, data: bytes) -> str:
        name = self._name(key)
        write_id = new_write_id(key, data, MAX_VALUE_BYTES)

        def attempt(_: bool) -> str:
            try:
                return self._put(name, data, write_id, IfNoneMatch="*")
            except ClientError as exc:
                if _status(exc) not in CONDITION_FAILED:
                    raise
                refusal = _describe(exc)
            return refused_create(key, write_id, self._version(name), refusal)

        return self._run("create", key, attempt)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        name = self._name(key)
        write_id = new_write_id(key, data, MAX_VALUE_BYTES)

        def attempt(_: bool) -> str:
            try:
                return self._put(name, data, write_id, IfMatch=etag)
            except ClientError as exc:
                if _code(exc) in MISSING_KEY:
                    raise NotFound(key, "does not exist") from None
                if _status(exc) not in CONDITION_FAILED:
                    raise
                refusal = _describe(exc)
            return refused_replace(key, etag, write_id, self._version(name), refusal)

        return self._run("replace", key, attempt)

    def delete(self, key: str, etag: str | None = None) -> None:
        """DeleteObject answers 204 for an absent key, so an unconditional delete asks first
        (one HEAD); a conditional one sends ``If-Match`` and asks only when refused."""
        name = self._name(key)

        def attempt(maybe_landed: bool) -> None:
            if etag is None:
                if self._version(name) is None:
                    if maybe_landed:
                        return  # an earlier try whose answer was lost most likely removed it
                    raise NotFound(key, "does not exist")
                self._call("delete_object", Key=name)
                return
            try:
                self._call("delete_object", Key=name, IfMatch=etag)
                return
            except ClientError as exc:
                if _code(exc) not in MISSING_KEY and _status(exc) not in CONDITION_FAILED:
                    raise
                refusal = _describe(exc)
            refused_delete(key, etag, maybe_landed, self._version(name), refusal)

        self._run("delete", key, attempt)

    def list(self, prefix: str = "") -> Iterator[str]:
        return iter([listed.key for listed in self.list_versions(prefix)])

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        """:class:`fdcore.abc.VersionedListing`: ListObjectsV2 gives each object's ``ETag``
        (as GetObject does) and ``LastModified`` (the store's clock, whole seconds on AWS)."""
        validate_prefix(prefix)
        folder = self.location.folder
        marker = self.location.object_key(ENVIRONMENT_MARKER)

        def attempt(_: bool) -> builtins.list[Listed]:
            listed: builtins.list[Listed] = []
            params: dict[str, Any] = {"Prefix": folder + prefix, "MaxKeys": self.list_page_size}
            while True:
                page = self._call("list_objects_v2", **params)
                listed.extend(
                    Listed(
                        item["Key"][len(folder) :], str(item["ETag"]), _utc(item["LastModified"])
                    )
                    for item in page.get("Contents", ())
                    # a console's "folder" marker is no key, nor is the environment's marker
                    if not item["Key"].endswith("/") and item["Key"] != marker
                )
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    break
                params["ContinuationToken"] = token
            # S3 lists in UTF-8 byte order, as we do; other stores may not
            listed.sort(key=lambda one: one.key)
            return listed

        return iter(self._run("list", prefix or None, attempt))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
