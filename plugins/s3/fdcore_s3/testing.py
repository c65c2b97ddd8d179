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
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3

START_TIMEOUT = 60.0  # seconds for the process to answer HTTP
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class S3Emulator:
    """One moto S3 server process on 127.0.0.1, serving one request at a time."""

    def __init__(self, ignore: Sequence[str] = (), *, durable: bool = False) -> None:
        self.ignore = tuple(ignore)
        self.port = free_port()
        self._scratch = tempfile.TemporaryDirectory(prefix="fdcore-s3-")
        self._log = Path(self._scratch.name) / "moto.log"
        self.journal = Path(self._scratch.name) / "journal.jsonl" if durable else None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, str]:
        """The ``[storage]`` options that reach this server."""
        return {"endpoint_url": self.endpoint_url, "region": REGION}

    def url(self, bucket: str, folder: str = "") -> str:
        return f"s3://{bucket}" + (f"/{folder.strip('/')}" if folder else "")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        if self.running:
            return
        command = [sys.executable, "-m", "fdcore_s3.testing", "--port", str(self.port)]
        for header in self.ignore:
            command += ["--ignore", header]
        if self.journal is not None:
            command += ["--journal", str(self.journal)]
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=self._scratch.name,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_answering()

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"the S3 emulator exited: {self._tail()}")
            try:
                urllib.request.urlopen(f"{self.endpoint_url}/", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer means it is serving
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"the S3 emulator did not answer within {START_TIMEOUT:.0f}s: "
                        f"{self._tail()}"
                    ) from None
                time.sleep(0.1)

    def _tail(self) -> str:
        try:
            lines = self._log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no output"
        return " | ".join(lines[-5:]) or "no output"

    def kill(self) -> None:
        """SIGKILL the server mid-whatever: its port is closed until :meth:`start`."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait(10)

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 10 s); unless durable, every object
        is lost."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

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

    def close(self) -> None:
        self.stop()
        self._scratch.cleanup()

    def __enter__(self) -> S3Emulator:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


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
