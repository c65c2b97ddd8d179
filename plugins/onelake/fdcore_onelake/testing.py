"""Run the Azurite blob emulator for tests: ``with Azurite() as azurite: azurite.url("c", "f")``.

Azurite comes from npm, pinned in ``tools/azurite`` and installed by ``make setup``. Each
:class:`Azurite` is one ``azurite-blob`` process on a free loopback port, started and stopped by
the test itself; :meth:`Azurite.stop` and :meth:`Azurite.start` may be called mid-test to inject
an outage (the port stays the same, so open stores reconnect). In memory by default: a restart
then loses every blob; pass ``location`` to keep data on disk across restarts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

import attrs

from fdcore_onelake.credentials import EMULATOR_ACCOUNT, EMULATOR_KEY
from fdcore_onelake.store import OneLakeStorage, open_storage

BINARY = Path("tools/azurite/node_modules/.bin/azurite-blob")
BINARY_VARIABLE = "FDCORE_AZURITE"  # overrides where azurite-blob is found
START_TIMEOUT = 60.0  # seconds for the process to answer HTTP


class AzuriteMissing(RuntimeError):
    """azurite-blob is not installed where the repository's Makefile puts it."""


def find_azurite() -> Path:
    """The ``azurite-blob`` executable: ``$FDCORE_AZURITE``, or ``tools/azurite`` in the repo."""
    override = os.environ.get(BINARY_VARIABLE)
    if override:
        if not os.access(override, os.X_OK):
            raise AzuriteMissing(
                f"${BINARY_VARIABLE}={override} is not an executable "
                "(unset it to use the Azurite that `make setup` installs)"
            )
        return Path(override)
    starts = [Path.cwd(), Path(__file__).resolve().parent]
    for start in starts:
        for folder in (start, *start.parents):
            candidate = folder / BINARY
            if os.access(candidate, os.X_OK):
                return candidate
    raise AzuriteMissing(
        f"Azurite is not installed ({BINARY} not found above {starts[0]}): run `make setup`"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Azurite:
    """One azurite-blob process on 127.0.0.1; the account is Azurite's ``devstoreaccount1``."""

    def __init__(self, location: Path | None = None, binary: Path | None = None) -> None:
        self.binary = binary or find_azurite()
        self.location = location  # None: in memory, lost on every stop
        self.port = free_port()
        self._scratch = tempfile.TemporaryDirectory(prefix="fdcore-azurite-")
        self._log = Path(self._scratch.name) / "azurite.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The blob account URL, ``http://127.0.0.1:<port>/devstoreaccount1``."""
        return f"http://127.0.0.1:{self.port}/{EMULATOR_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={EMULATOR_ACCOUNT};"
            f"AccountKey={EMULATOR_KEY};BlobEndpoint={self.endpoint};"
        )

    def url(self, container: str, folder: str = "") -> str:
        """The environment URL of ``folder`` in ``container`` (``folder`` may be nested)."""
        return f"{self.endpoint}/{container}" + (f"/{folder.strip('/')}" if folder else "")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the process (on the same port as before) and wait until it answers."""
        if self.running:
            return
        command = [
            str(self.binary),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--skipApiVersionCheck",
            "--silent",
            "--loose",
            "--disableTelemetry",
        ]
        if self.location is None:
            command.append("--inMemoryPersistence")
        else:
            self.location.mkdir(parents=True, exist_ok=True)
            command += ["--location", str(self.location)]
        with open(self._log, "ab") as log:
            # cwd: Azurite drops its own files (debug, telemetry) where it runs; keep them here.
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
                raise RuntimeError(
                    f"azurite-blob exited with code {self._process.returncode}: {self._tail()}"
                )
            try:
                urllib.request.urlopen(f"{self.endpoint}?comp=list", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer (403 without a signature) means it is serving
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"azurite-blob did not answer within {START_TIMEOUT:.0f}s: {self._tail()}"
                    ) from None
                time.sleep(0.1)

    def _tail(self) -> str:
        try:
            lines = self._log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no output"
        return " | ".join(lines[-5:]) or "no output"

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 10 s); a no-op if it is not running."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_container(self, name: str) -> None:
        """Create container ``name`` if it does not exist yet."""
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.blob import BlobServiceClient

        credential = {"account_name": EMULATOR_ACCOUNT, "account_key": EMULATOR_KEY}
        with (
            BlobServiceClient(self.endpoint, credential=credential) as service,
            contextlib.suppress(ResourceExistsError),
        ):
            service.create_container(name)

    def close(self) -> None:
        self.stop()
        self._scratch.cleanup()

    def __enter__(self) -> Azurite:
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


@attrs.frozen
class SmallPagesFactory:
    """Opens ``url`` with listing pages of ``page`` keys, so a suite's paging test crosses
    pages in a few hundred keys; picklable, for the suite's race workers (a class in a test
    module is not importable in them)."""

    url: str
    page: int = 100

    def __call__(self) -> OneLakeStorage:
        return open_storage(self.url, list_page_size=self.page)
