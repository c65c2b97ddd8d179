"""Error mapping and retries, against a real local HTTP server that answers as scripted.

Azurite cannot be made to answer 503 or 412 on demand, so these tests put a small scripted
server on 127.0.0.1 behind the real SDK and HTTP stack: each request gets the next scripted
reply, and every request is recorded. Waits go to a recorder instead of sleeping.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
import pytest
from fdcore_onelake.credentials import resolve_credential
from fdcore_onelake.store import OneLakeStorage
from fdcore_onelake.testing import free_port
from fdcore_onelake.urls import parse_location

from fdcore.abc import Blob
from fdcore.errors import AlreadyExists, NotFound, PreconditionFailed, StorageUnavailable
from fdcore.retry import WRITE_ID, RetryPolicy

pytestmark = pytest.mark.processes


@attrs.frozen
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@attrs.frozen
class Reply:
    status: int
    code: str = ""  # x-ms-error-code
    headers: dict[str, str] = attrs.field(factory=dict)
    delay: float = 0.0  # seconds before answering (to trip the read timeout)
    body: bytes = b""


Script = list[Reply | Callable[[list[Seen]], Reply]]


def created(etag: str = '"0x1"') -> Reply:
    return Reply(201, headers={"ETag": etag, "Last-Modified": "Sun, 29 Nov 2026 12:00:00 GMT"})


def content(data: bytes, etag: str, delay: float = 0.0) -> Reply:
    """A Get Blob answer to the SDK's first ranged read."""
    headers = {
        "ETag": etag,
        "Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}",
        "x-ms-blob-type": "BlockBlob",
    }
    return Reply(206, headers=headers, delay=delay, body=data)


def properties(etag: str, write_id: str) -> Reply:
    return Reply(
        200,
        headers={
            "ETag": etag,
            f"x-ms-meta-{WRITE_ID}": write_id,
            "x-ms-blob-type": "BlockBlob",
            "Last-Modified": "Sun, 29 Nov 2026 12:00:00 GMT",
        },
    )


class ScriptedService:
    """An HTTP server on 127.0.0.1 answering request n with ``script[n]``."""

    def __init__(self) -> None:
        self.script: Script = []
        self.seen: list[Seen] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                seen = Seen(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}
                )
                service.seen.append(seen)
                step = service.script.pop(0) if service.script else Reply(599, "ScriptExhausted")
                reply = step if isinstance(step, Reply) else step(service.seen)
                time.sleep(reply.delay)
                body = reply.body
                if reply.code and self.command != "HEAD":
                    error = f"<Error><Code>{reply.code}</Code><Message>scripted</Message></Error>"
                    body = f"<?xml version='1.0'?>{error}".encode()
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.code:
                    self.send_header("x-ms-error-code", reply.code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (the timeout test)
                    self.wfile.write(body)

            do_GET = do_PUT = do_HEAD = do_DELETE = answer

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/devstoreaccount1/mailbox/env"

    def methods(self) -> list[str]:
        return [seen.method for seen in self.seen]


@pytest.fixture
def service() -> Iterator[ScriptedService]:
    scripted = ScriptedService()
    scripted.thread.start()
    yield scripted
    scripted.server.shutdown()
    scripted.server.server_close()


FAST = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.5, read_timeout=0.5)


def open_scripted(url: str, waits: list[float], retry: RetryPolicy = FAST) -> OneLakeStorage:
    location = parse_location(url)
    return OneLakeStorage(
        url, location, resolve_credential(url, location, {}, {}), retry, waits.append
    )


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def store(service: ScriptedService, waits: list[float]) -> Iterator[OneLakeStorage]:
    opened = open_scripted(service.url(), waits)
    yield opened
    opened.close()


def test_throttling_is_retried_honouring_retry_after(
    service: ScriptedService, store: OneLakeStorage, waits: list[float]
) -> None:
    service.script = [
        Reply(503, "ServerBusy"),
        Reply(429, headers={"Retry-After": "0.4"}),
        created(),
    ]
    assert store.create("requests/r-1.json", b"{}") == '"0x1"'
    assert service.methods() == ["PUT", "PUT", "PUT"]
    assert all(seen.headers.get("if-none-match") == "*" for seen in service.seen)
    assert all(seen.path.endswith("/mailbox/env/requests/r-1.json") for seen in service.seen)
    assert len(waits) == 2 and waits[1] >= 0.4  # the service's pause, within our 0.5 s cap


def test_write_is_one_put_blob_never_blocks(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    service.script = [created()]
    store.create("big.bin", b"x" * (9 << 20))  # above the SDK's default single-put size
    (put,) = service.seen
    assert put.method == "PUT" and "comp=block" not in put.path
    assert put.headers["x-ms-blob-type"] == "BlockBlob"
    assert put.headers["content-length"] == str(9 << 20)


def test_gives_up_after_the_attempts_with_capped_backoff(
    service: ScriptedService, store: OneLakeStorage, waits: list[float]
) -> None:
    service.script = [Reply(500, "InternalError")] * 4
    with pytest.raises(StorageUnavailable) as raised:
        store.replace("k", b"v", '"0x1"')
    assert "failed 4 times; last: HTTP 500 InternalError" in str(raised.value)
    assert service.methods() == ["PUT"] * 4  # the SDK's own retries are off
    assert len(waits) == 3
    for failures, wait in enumerate(waits, start=1):
        backoff = min(FAST.max_delay, FAST.base_delay * 2 ** (failures - 1))
        assert backoff / 2 <= wait <= backoff


def test_slow_answer_times_out_and_is_retried(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    service.script = [content(b"late", '"0x8"', delay=1.5), content(b"prompt", '"0x9"')]
    assert store.read("k") == Blob(b"prompt", '"0x9"')
    assert service.methods() == ["GET", "GET"]


def test_client_errors_are_not_retried(service: ScriptedService, store: OneLakeStorage) -> None:
    service.script = [Reply(400, "InvalidHeaderValue")]
    with pytest.raises(
        StorageUnavailable, match="refused by the service: HTTP 400 InvalidHeaderValue"
    ):
        store.create("k", b"v")
    assert service.methods() == ["PUT"]


@pytest.mark.parametrize(("status", "code"), [(409, "BlobAlreadyExists"), (412, "ConditionNotMet")])
def test_failed_create_is_already_exists_for_409_and_412(
    service: ScriptedService, store: OneLakeStorage, status: int, code: str
) -> None:
    service.script = [Reply(status, code)]
    with pytest.raises(AlreadyExists):
        store.create("k", b"v")
    assert service.methods() == ["PUT"]  # a first try's conflict is someone else's: no check


def _echo_write_id(etag: str) -> Callable[[list[Seen]], Reply]:
    """Answer a HEAD as if the first PUT had landed: its write id is the blob's."""
    return lambda seen: properties(etag, seen[0].headers[f"x-ms-meta-{WRITE_ID}"])


def test_retried_create_that_had_landed_is_ours(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    # The first PUT landed but its answer was a 500; the retry meets our own blob (412).
    service.script = [
        Reply(500, "InternalError"),
        Reply(412, "ConditionNotMet"),
        _echo_write_id('"0x7"'),
    ]
    assert store.create("k", b"v") == '"0x7"'
    assert service.methods() == ["PUT", "PUT", "HEAD"]
    first, second = (service.seen[0].headers, service.seen[1].headers)
    assert first[f"x-ms-meta-{WRITE_ID}"] == second[f"x-ms-meta-{WRITE_ID}"]


def test_retried_create_meeting_another_writer_is_already_exists(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    service.script = [
        Reply(503, "ServerBusy"),
        Reply(409, "BlobAlreadyExists"),
        properties('"0x7"', "theirs"),
    ]
    with pytest.raises(AlreadyExists):
        store.create("k", b"v")


def test_retried_replace_that_had_landed_is_ours(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    service.script = [
        Reply(500, "OperationTimedOut"),
        Reply(412, "ConditionNotMet"),
        _echo_write_id('"0x8"'),
    ]
    assert store.replace("k", b"v", '"0x1"') == '"0x8"'
    assert all(seen.headers.get("if-match") == '"0x1"' for seen in service.seen[:2])


def test_replace_412_is_precondition_failed_or_not_found_by_what_is_there(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    service.script = [Reply(412, "ConditionNotMet"), properties('"0x2"', "other")]
    with pytest.raises(PreconditionFailed, match=r'etag "0x1" is stale \(now "0x2"\)'):
        store.replace("k", b"v", '"0x1"')
    service.script = [Reply(412, "ConditionNotMet"), Reply(404, "BlobNotFound")]
    with pytest.raises(NotFound):
        store.replace("k", b"v", '"0x1"')
    service.script = [Reply(404, "BlobNotFound")]
    with pytest.raises(NotFound):
        store.replace("k", b"v", '"0x1"')


def test_delete_mapping(service: ScriptedService, store: OneLakeStorage) -> None:
    service.script = [Reply(404, "BlobNotFound")]
    with pytest.raises(NotFound):
        store.delete("k")
    service.script = [Reply(412, "ConditionNotMet"), Reply(404, "BlobNotFound")]
    with pytest.raises(NotFound):
        store.delete("k", '"0x1"')
    assert service.methods() == ["DELETE", "DELETE", "HEAD"]
    service.script = [Reply(412, "ConditionNotMet"), properties('"0x2"', "other")]
    with pytest.raises(PreconditionFailed):
        store.delete("k", '"0x1"')
    assert service.seen[3].headers.get("if-match") == '"0x1"'
    # A delete whose answer was lost, then 404 on the retry: it is gone, as asked.
    service.script = [Reply(502), Reply(404, "BlobNotFound")]
    store.delete("k")


def test_missing_container_is_unavailable_not_absent(
    service: ScriptedService, store: OneLakeStorage
) -> None:
    service.script = [Reply(404, "ContainerNotFound")]
    with pytest.raises(StorageUnavailable, match="container 'mailbox' does not exist"):
        store.read("k")
    service.script = [Reply(404, "ContainerNotFound")]
    with pytest.raises(StorageUnavailable, match="does not exist"):
        store.replace("k", b"v", '"0x1"')


def test_refused_connection_is_unavailable(waits: list[float]) -> None:
    url = f"http://127.0.0.1:{free_port()}/devstoreaccount1/mailbox/env"  # nobody listens
    store = open_scripted(url, waits)
    try:
        with pytest.raises(StorageUnavailable, match="failed 4 times; last: ") as raised:
            store.list()
    finally:
        store.close()
    # which azure-core error names a refused connection is azure-core's to choose: ours is to
    # retry it, a bounded number of times, and say so in one line
    assert len(waits) == 3 and "\n" not in str(raised.value)
