"""Run an S3-compatible server for tests: ``with S3Emulator() as s3: s3.url("bucket", "folder")``.

The server is moto's (``moto[server]``, the test extra), in its own process on a free loopback
port, started and stopped by the test itself. Two things differ from ``moto_server``:

* Requests are served one at a time. moto checks ``If-None-Match`` / ``If-Match`` and then
  writes, in two steps under no lock (``moto/s3/responses.py``, ``put_object``), so two racing
  writers could both pass a condition on a multi-threaded server. Served in turn, each request
  is atomic, as on the real services (Azurite is single-threaded the same way).
* ``ignore`` names request headers to drop before moto sees them: ``ignore=("If-Match",)``
  makes a store whose replace is unconditional, which ``fdcore doctor`` must refuse.

* With ``durable=True`` every write the server answered with success (PUT, POST, DELETE) is
  appended to a journal before its answer is sent, and a restarted server replays the journal
  before it opens its port: moto keeps objects in memory only, and this is how a restart
  (:meth:`S3Emulator.kill` then :meth:`S3Emulator.start`) keeps them, as a real store would.

``python -m fdcore_s3.testing --port 9000`` runs the server alone (benchmarks, manual tries).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import boto3

from fdcore.testing.servers import ServerProcess
from fdcore_s3.location import parse_location
from fdcore_s3.store import S3Storage

ACCESS_KEY = "fdcore-test"  # moto accepts any signature; these only satisfy boto3's chain
SECRET_KEY = "fdcore-test-secret"
REGION = "us-east-1"


def credentials_environment() -> dict[str, str]:
    """Variables that give boto3's standard chain the emulator's made-up credentials."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
    }


class S3Emulator(ServerProcess):
    """One moto S3 server process on 127.0.0.1, serving one request at a time."""

    title = "the S3 emulator (moto)"

    def __init__(self, ignore: Sequence[str] = (), *, durable: bool = False) -> None:
        super().__init__()
        self.ignore = tuple(ignore)
        self.journal = self.scratch / "journal.jsonl" if durable else None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, str]:
        """The ``[storage]`` options that reach this server."""
        return {"endpoint_url": self.endpoint_url, "region": REGION}

    def url(self, bucket: str, folder: str = "") -> str:
        return f"s3://{bucket}" + (f"/{folder.strip('/')}" if folder else "")

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "fdcore_s3.testing", "--port", str(self.port)]
        for header in self.ignore:
            command += ["--ignore", header]
        if self.journal is not None:
            command += ["--journal", str(self.journal)]
        return command

    def ready_url(self) -> str:
        return f"{self.endpoint_url}/"

    def client(self) -> Any:
        """A boto3 client on this server, for setting up what tests need (buckets)."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def create_bucket(self, name: str) -> None:
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        finally:
            client.close()


@attrs.frozen
class SmallPagesFactory:
    """Opens ``url`` with listing pages of ``page`` keys, so a suite's paging test crosses
    pages in a few hundred keys; picklable, for the suite's race workers."""

    url: str
    options: dict[str, str]
    page: int = 100

    def __call__(self) -> S3Storage:
        return S3Storage(parse_location(self.url, self.options), list_page_size=self.page)


# -- the server process -------------------------------------------------------------------------

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


WRITES = frozenset({"PUT", "POST", "DELETE"})
# What a journal keeps of a request's WSGI environ: moto reads nothing else.
KEPT = (
    "REQUEST_METHOD",
    "PATH_INFO",
    "QUERY_STRING",
    "RAW_URI",
    "REQUEST_URI",
    "SERVER_NAME",
    "SERVER_PORT",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
)


def one_at_a_time(app: WsgiApp, ignore: Sequence[str], journal: Path | None = None) -> WsgiApp:
    """``app`` serving one request at a time, without the headers named in ``ignore``, and
    appending each successful write to ``journal`` (when given) before answering it."""
    lock = threading.Lock()
    dropped = ["HTTP_" + header.upper().replace("-", "_") for header in ignore]
    log = None if journal is None else open(journal, "a", encoding="utf-8")  # noqa: SIM115

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        for name in dropped:
            environ.pop(name, None)
        body = b""
        if log is not None and environ["REQUEST_METHOD"] in WRITES:
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
        status: list[str] = []

        def started(code: str, headers: Any, *rest: Any) -> Any:
            status.append(code)
            return start_response(code, headers, *rest)

        with lock:  # the whole answer is made under the lock: a condition and its write at once
            answer = list(app(environ, started))
            if log is not None and environ["REQUEST_METHOD"] in WRITES and status[0][0] == "2":
                kept = {k: v for k, v in environ.items() if k in KEPT or k.startswith("HTTP_")}
                entry = {"environ": kept, "body": base64.b64encode(body).decode()}
                log.write(json.dumps(entry) + "\n")
                log.flush()  # in the OS before the answer leaves: a SIGKILL loses no answered write
            return answer

    return serve


def replay(app: WsgiApp, journal: Path) -> int:
    """Apply ``journal``'s writes to ``app`` in order (a torn last line is skipped)."""
    from werkzeug.test import EnvironBuilder

    count = 0
    lines = journal.read_text(encoding="utf-8").splitlines() if journal.exists() else []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # the server was killed while writing it: its answer was never sent
        environ = EnvironBuilder().get_environ()
        environ.update(entry["environ"])
        environ["wsgi.input"] = io.BytesIO(base64.b64decode(entry["body"]))
        list(app(environ, lambda *args: None))
        count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="moto's S3 server, one request at a time")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--ignore", action="append", default=[], help="a request header to drop (repeatable)"
    )
    parser.add_argument("--journal", type=Path, help="keep writes here; replay them at start")
    args = parser.parse_args(argv)
    # Imported here: only the server process needs moto and werkzeug.
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request
    moto = DomainDispatcherApplication(create_backend_app)
    if args.journal is not None:
        replay(moto, args.journal)
    app = one_at_a_time(moto, args.ignore, args.journal)
    server = make_server(
        "127.0.0.1", args.port, app, threaded=True, request_handler=MotoRequestHandler
    )
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


if __name__ == "__main__":
    main()
