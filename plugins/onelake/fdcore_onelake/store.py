"""A mailbox in a OneLake / ADLS Gen2 folder, written through the Blob surface.

* create-if-absent is one ``Put Blob`` with ``If-None-Match: *``; replace-if-unchanged is one
  ``Put Blob`` with ``If-Match: <etag>``. A single Put Blob is atomic: a reader sees the old value
  or the new one, never a part (the DataLake create/append/flush sequence is not atomic). Values
  up to :data:`MAX_VALUE_BYTES` always go as one Put Blob, never as staged blocks.
* A failed create is 412 on Azure and 409 on Azurite: both mean AlreadyExists.
* Transient failures (5xx, 408, 429, timeouts, refused or reset connections) are retried here
  with capped exponential back-off and jitter, then raised as StorageUnavailable. The SDK's own
  retry policy is switched off so the number and spacing of tries is ours and bounded.
* A retried write whose first try landed but whose answer was lost would see its own write as a
  conflict (409/412). Every write therefore carries a random write id in its metadata; when a
  retry meets a conflict, one ``Get Blob Properties`` tells whether the blob now there is this
  very write, and if so the write is reported as done with that blob's etag.
* One service client (one HTTP session) per process, account and credential, shared by every
  Storage opened on it.
"""

from __future__ import annotations

import builtins
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar

import attrs
from azure.core import MatchConditions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    IncompleteReadError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob import BlobClient, BlobServiceClient

from fdcore.abc import (
    ENVIRONMENT_MARKER,
    MARKER_CONTENT,
    Blob,
    Listed,
    validate_key,
    validate_prefix,
)
from fdcore.errors import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    StorageError,
    StorageUnavailable,
    UnreadableFile,
)
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
from fdcore_onelake.credentials import Credential, default_azure_credential, resolve_credential
from fdcore_onelake.urls import Location, parse_location, redact

T = TypeVar("T")

MAX_VALUE_BYTES = 64 << 20  # far above any mailbox file; below every service's Put Blob limit
MAX_BLOB_NAME = 1024  # Azure's limit on a blob name, folder prefix included
FOLDER_MARK = "hdi_isfolder"  # metadata of a directory entry on a hierarchical namespace
CONTAINER_MISSING = "ContainerNotFound"
LIST_PAGE_SIZE = 5000  # the service's largest page of a blob listing

# The SDK logs every request and response at INFO, and an agent polls all day: keep that logger
# to warnings unless the operator has set its level themselves.
_http_log = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
if _http_log.level == logging.NOTSET:
    _http_log.setLevel(logging.WARNING)


@attrs.define
class _Shared:
    service: BlobServiceClient
    users: int = 0


_services: dict[tuple[int, str, str, float, float], _Shared] = {}
_services_lock = threading.Lock()


def _acquire(location: Location, credential: Credential, retry: RetryPolicy) -> BlobServiceClient:
    """The process's client for this account and credential (keyed by pid: after a fork the
    child must not reuse the parent's connections)."""
    key = (
        os.getpid(),
        location.account_url,
        credential.identity,
        retry.connection_timeout,
        retry.read_timeout,
    )
    with _services_lock:
        shared = _services.get(key)
        if shared is None:
            entra = credential.identity == "entra"
            value = default_azure_credential() if entra else credential.value
            service = BlobServiceClient(
                location.account_url,
                credential=value,
                retry_total=0,  # our loop retries; the SDK's would multiply and hide failures
                max_single_put_size=MAX_VALUE_BYTES,
                connection_timeout=retry.connection_timeout,
                read_timeout=retry.read_timeout,
            )
            shared = _services[key] = _Shared(service)
        shared.users += 1
        return shared.service


def _release(service: BlobServiceClient) -> None:
    with _services_lock:
        for key, shared in builtins.list(_services.items()):
            if shared.service is service:
                shared.users -= 1
                if shared.users <= 0:
                    del _services[key]
                    service.close()
                return


def open_storage(
    url: str,
    options: Mapping[str, str] | None = None,
    *,
    retry: RetryPolicy | None = None,
    environ: Mapping[str, str] = os.environ,
    list_page_size: int = LIST_PAGE_SIZE,
) -> OneLakeStorage:
    """Open environment ``url`` (a ConfigError if the URL or an option is unusable)."""
    location = parse_location(url)
    credential = resolve_credential(url, location, dict(options or {}), environ)
    return OneLakeStorage(
        url, location, credential, retry or RetryPolicy(), list_page_size=list_page_size
    )


def _status(exc: HttpResponseError) -> int:
    return int(exc.status_code or 0)


def _code(exc: HttpResponseError) -> str | None:
    """The service's error code (x-ms-error-code), which the storage SDK adds to its errors."""
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # the SDK's StorageErrorCode enum, or the raw string
    return str(code) if code else None


def _blob_missing(exc: HttpResponseError) -> bool:
    """404 for the blob itself; a missing container is a missing environment, not a key."""
    return _status(exc) == 404 and _code(exc) != CONTAINER_MISSING


def _total_size(content_range: str | None, downloaded: int) -> int:
    """The blob's size from a ranged answer's ``Content-Range: bytes 0-99/12345``."""
    total = (content_range or "").rpartition("/")[2]
    return int(total) if total.isdigit() else downloaded


def _is_folder(metadata: Mapping[str, str] | None) -> bool:
    return (metadata or {}).get(FOLDER_MARK, "").lower() == "true"


def _quoted(etag: str) -> str:
    """An etag as a read's ``ETag`` header has it: a listing's XML may leave out the quotes."""
    etag = str(etag)
    return etag if etag.startswith('"') else f'"{etag}"'


def _utc(stamp: datetime) -> datetime:
    """A service time in UTC (the SDK's are aware; a naive one is taken as UTC)."""
    return (
        stamp.replace(tzinfo=timezone.utc)
        if stamp.tzinfo is None
        else stamp.astimezone(timezone.utc)
    )


def _retry_after(exc: HttpResponseError) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    value = headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: our own back-off is a fine substitute


def _describe(exc: Exception) -> str:
    """One line about an SDK error: status and error code, never headers or secrets."""
    if isinstance(exc, HttpResponseError) and exc.status_code:
        code = f" {_code(exc)}" if _code(exc) else ""
        return f"HTTP {exc.status_code}{code} ({exc.reason or 'no reason'})"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else 'no detail'}"


class OneLakeStorage:
    """The :class:`fdcore.abc.Storage` protocol over one folder of a Blob container."""

    def __init__(
        self,
        url: str,
        location: Location,
        credential: Credential,
        retry: RetryPolicy,
        sleep: Callable[[float], None] = time.sleep,
        list_page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        self.url = url
        self.location = location
        self.credential = credential
        self.retry = retry
        self._sleep = sleep
        self.list_page_size = list_page_size
        self._rng = random.Random()
        self._write_time: datetime | None = None  # the service's Last-Modified of our last write
        self.clock_resolution = 1.0  # Last-Modified has whole seconds (fdcore.abc.StoreClock)
        self._service: BlobServiceClient | None = _acquire(location, credential, retry)
        self._container = self._service.get_container_client(location.container)
        self._where = f"{redact(url)} ({credential.description})"

    # -- helpers -------------------------------------------------------------------------------

    def _name(self, key: str) -> str:
        name = self.location.blob_name(validate_key(key))
        if len(name) > MAX_BLOB_NAME:
            raise InvalidKey(key, f"blob name with the folder prefix exceeds {MAX_BLOB_NAME} chars")
        return name

    def _blob(self, name: str) -> BlobClient:
        return self._container.get_blob_client(name)

    def _run(self, what: str, key: str | None, attempt: Callable[[bool], T]) -> T:
        """Call ``attempt(maybe_landed)`` until it returns, retrying transient failures."""
        where, sleep, rng = self._where, self._sleep, self._rng
        return self.retry.run(attempt, self._transient, what, key, where, sleep, rng)

    def _transient(self, what: str, key: str | None, exc: Exception) -> Failure | None:
        """A failure worth another try; raise the error an unusable store is; None otherwise."""
        if isinstance(exc, ClientAuthenticationError):
            if not exc.status_code:  # no token at all: azure-identity found no credential
                raise StorageUnavailable(
                    key, f"{what} on {self._where}: no credential: {_describe(exc)}"
                ) from None
            raise self._unusable(what, key, exc) from None
        if isinstance(exc, ServiceRequestError):  # no request was sent (refused, DNS, TLS)
            problem = f"{_describe(exc)} (is the URL's host right, and the service up?)"
            return Failure(problem, maybe_landed=False)
        if isinstance(exc, (ServiceResponseError, IncompleteReadError)):  # sent, answer lost
            return Failure(_describe(exc), maybe_landed=True)
        if isinstance(exc, HttpResponseError):
            if _status(exc) not in TRANSIENT_STATUS:
                raise self._unusable(what, key, exc) from None
            return Failure(_describe(exc), maybe_landed=True, retry_after=_retry_after(exc))
        return None

    def _unusable(self, what: str, key: str | None, exc: HttpResponseError) -> StorageError:
        status = _status(exc)
        if _code(exc) == CONTAINER_MISSING:
            hint = f"container {self.location.container!r} does not exist"
        elif status in (401, 403):
            hint = "access denied (needs Storage Blob Data Contributor, or workspace Contributor)"
        else:
            hint = "refused by the service"
        return StorageUnavailable(key, f"{what} on {self._where}: {hint}: {_describe(exc)}")

    def _version(self, name: str) -> StoredVersion | None:
        """The current version's etag and write id, or None if there is no blob (one HEAD)."""
        try:
            props = self._blob(name).get_blob_properties()
        except HttpResponseError as exc:
            if _blob_missing(exc):
                return None
            raise
        if _is_folder(props.metadata):
            return None
        return StoredVersion(props.etag, (props.metadata or {}).get(WRITE_ID))

    def _put(self, name: str, data: bytes, write_id: str, **condition: Any) -> str:
        result = self._blob(name).upload_blob(
            data,
            length=len(data),
            overwrite=True,  # the condition below decides; "overwrite=False" would add its own
            metadata={WRITE_ID: write_id},
            max_concurrency=1,
            **condition,
        )
        written = result.get("last_modified")
        if isinstance(written, datetime):
            self._write_time = _utc(written)
        return str(result["etag"])

    # -- the environment's marker ----------------------------------------------------------

    def is_environment(self) -> bool:
        """Whether ``fdcore init`` marked this folder (one HEAD; a missing container is its
        own one-line error)."""
        name = self.location.blob_name(ENVIRONMENT_MARKER)
        return self._run("open", None, lambda _: self._version(name) is not None)

    def mark_environment(self) -> None:
        """Write the marker unless it is there (create-if-absent: racing inits are both fine)."""
        name = self.location.blob_name(ENVIRONMENT_MARKER)

        def attempt(_: bool) -> None:
            try:
                self._put(name, MARKER_CONTENT, "marker", match_condition=MatchConditions.IfMissing)
            except HttpResponseError as exc:
                if _status(exc) not in (409, 412):  # 409 from Azurite, 412 from Azure
                    raise

        self._run("mark the environment", None, attempt)

    # -- the protocol --------------------------------------------------------------------------

    def read(self, key: str) -> Blob | None:
        name = self._name(key)

        def attempt(_: bool) -> Blob | None:
            try:
                download = self._blob(name).download_blob(max_concurrency=1)
                data = download.readall()
            except HttpResponseError as exc:
                if _blob_missing(exc):
                    return None
                raise
            if _is_folder(download.properties.metadata):
                return None  # a directory entry of a hierarchical namespace is not a key
            return Blob(data, str(download.properties.etag))

        return self._run("read", key, attempt)

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        """:class:`fdcore.abc.BoundedRead`: a mailbox file, never more than ``max_bytes`` (and
        one) downloaded; a bigger blob is an :class:`UnreadableFile` whatever its size."""
        name = self._name(key)

        def attempt(_: bool) -> Blob | None:
            try:
                blob = self._blob(name)
                # A range past the end of an empty blob is refused (416): ask for it whole.
                download = blob.download_blob(offset=0, length=max_bytes + 1, max_concurrency=1)
                data = download.readall()
            except HttpResponseError as exc:
                if _blob_missing(exc):
                    return None
                if _status(exc) != 416:
                    raise
                download = self._blob(name).download_blob(max_concurrency=1)
                data = download.readall()
            if _is_folder(download.properties.metadata):
                raise UnreadableFile(key, "is a folder, not a file: not read")
            size = _total_size(download.properties.content_range, len(data))
            if size > max_bytes:
                raise UnreadableFile(
                    key, f"is {size} bytes, over the bound of {max_bytes}: not read"
                )
            return Blob(data, str(download.properties.etag))

        return self._run("read", key, attempt)

    def unchanged(self, key: str, etag: str) -> bool:
        """:class:`fdcore.abc.ChangeCheck`: one HEAD instead of a download of up to the bound."""
        name = self._name(key)
        return self._run("read", key, lambda _: holds(self._version(name), etag))

    def last_write_time(self) -> datetime | None:
        """:class:`fdcore.abc.StoreClock`: the service's ``Last-Modified`` of the last blob this
        store wrote (whole seconds: a skew is known to about a second, well inside any grace)."""
        return self._write_time

    def create(self, key: str, data: bytes) -> str:
        name = self._name(key)
        write_id = new_write_id(key, data, MAX_VALUE_BYTES)

        def attempt(maybe_landed: bool) -> str:
            try:
                return self._put(name, data, write_id, match_condition=MatchConditions.IfMissing)
            except HttpResponseError as exc:
                if _status(exc) not in (409, 412):  # 409 from Azurite, 412 from Azure
                    raise
                refusal = _describe(exc)
            if not maybe_landed:  # no earlier try could have written it: no HEAD needed
                raise AlreadyExists(key, "already exists")
            return refused_create(key, write_id, self._version(name), refusal)

        return self._run("create", key, attempt)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        name = self._name(key)
        write_id = new_write_id(key, data, MAX_VALUE_BYTES)

        def attempt(_: bool) -> str:
            try:
                return self._put(
                    name,
                    data,
                    write_id,
                    etag=etag,
                    match_condition=MatchConditions.IfNotModified,
                )
            except HttpResponseError as exc:
                if _blob_missing(exc):
                    raise NotFound(key, "does not exist") from None
                if _status(exc) != 412:
                    raise
                refusal = _describe(exc)
            # 412: stale etag, or (on some services) no blob
            return refused_replace(key, etag, write_id, self._version(name), refusal)

        return self._run("replace", key, attempt)

    def delete(self, key: str, etag: str | None = None) -> None:
        name = self._name(key)
        condition: dict[str, Any] = {}
        if etag is not None:
            condition = {"etag": etag, "match_condition": MatchConditions.IfNotModified}

        def attempt(maybe_landed: bool) -> None:
            try:
                self._blob(name).delete_blob(**condition)
                return
            except HttpResponseError as exc:
                if _blob_missing(exc):
                    current = None
                elif _status(exc) == 412:  # a stale etag, or (Azurite) a missing blob
                    current = self._version(name)
                else:
                    raise
                refusal = _describe(exc)
            refused_delete(key, etag, maybe_landed, current, refusal)

        self._run("delete", key, attempt)

    def list(self, prefix: str = "") -> Iterator[str]:
        return iter([listed.key for listed in self.list_versions(prefix)])

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        """:class:`fdcore.abc.VersionedListing`: the blob listing gives each blob's etag and
        ``Last-Modified`` (the service's clock, whole seconds) in the same pages."""
        validate_prefix(prefix)
        folder = self.location.prefix
        marker = self.location.blob_name(ENVIRONMENT_MARKER)

        def attempt(_: bool) -> builtins.list[Listed]:
            listed = [
                Listed(props.name[len(folder) :], _quoted(props.etag), _utc(props.last_modified))
                for props in self._container.list_blobs(
                    name_starts_with=folder + prefix,
                    include=["metadata"],
                    results_per_page=self.list_page_size,
                )
                if not _is_folder(props.metadata) and props.name != marker
            ]
            # the service lists in order; sorting costs little and makes it ours
            listed.sort(key=lambda one: one.key)
            return listed

        return iter(self._run("list", prefix or None, attempt))

    def close(self) -> None:
        if self._service is not None:
            _release(self._service)
            self._service = None
