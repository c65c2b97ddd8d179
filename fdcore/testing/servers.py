"""A store's emulator as a process of the test: :class:`ServerProcess`, on a free loopback port.

A backend's tests start the server they talk to themselves (Azurite for fdcore-onelake, moto's
S3 server for fdcore-s3): a subclass names the command and a URL that answers once the server
serves, and gets start, stop, a SIGKILL mid-test and a restart on the same port (open stores
reconnect), with the server's output kept for the error that says why it did not start.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import TypeVar

__all__ = [
    "ServerProcess",
    "free_port",
]

S = TypeVar("S", bound="ServerProcess")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    """One server process on ``127.0.0.1:<port>``, its output in a scratch folder it runs in."""

    #: What error messages call it.
    title = "server"
    #: Seconds for the process to answer HTTP.
    start_timeout = 60.0

    def __init__(self) -> None:
        self.port = free_port()
        self._scratch = tempfile.TemporaryDirectory(prefix="fdcore-server-")
        self.scratch = Path(self._scratch.name)
        self._log = self.scratch / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The command line that runs the server on :attr:`port`."""
        raise NotImplementedError(f"{type(self).__name__} must define command()")

    def ready_url(self) -> str:
        """A URL the server answers (any HTTP status) once it serves."""
        raise NotImplementedError(f"{type(self).__name__} must define ready_url()")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the process (on the same port as before) and wait until it answers."""
        if self.running:
            return
        command = self.command()
        with open(self._log, "ab") as log:
            # cwd: emulators drop files of their own (debug logs, telemetry) where they run.
            self._process = subprocess.Popen(
                command,
                cwd=self.scratch,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_answering()

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"{self.title} exited with code {self._process.returncode}: {self._tail()}"
                )
            try:
                urllib.request.urlopen(self.ready_url(), timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer (403 without a signature) means it is serving
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"{self.title} did not answer within {self.start_timeout:.0f}s: "
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
        """SIGKILL the process, whatever it is doing: its port is closed until :meth:`start`."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

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

    def close(self) -> None:
        self.stop()
        self._scratch.cleanup()

    def __enter__(self: S) -> S:
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
