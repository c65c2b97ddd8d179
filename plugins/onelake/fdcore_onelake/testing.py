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
from pathlib import Path

import attrs

from fdcore.testing.servers import ServerProcess, free_port
from fdcore_onelake.credentials import EMULATOR_ACCOUNT, EMULATOR_KEY
from fdcore_onelake.store import OneLakeStorage, open_storage

__all__ = ["Azurite", "AzuriteMissing", "SmallPagesFactory", "find_azurite", "free_port"]

BINARY = Path("tools/azurite/node_modules/.bin/azurite-blob")
BINARY_VARIABLE = "FDCORE_AZURITE"  # overrides where azurite-blob is found


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


class Azurite(ServerProcess):
    """One azurite-blob process on 127.0.0.1; the account is Azurite's ``devstoreaccount1``."""

    title = "azurite-blob"

    def __init__(self, location: Path | None = None, binary: Path | None = None) -> None:
        self.binary = binary or find_azurite()
        super().__init__()
        self.location = location  # None: in memory, lost on every stop

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

    def command(self) -> list[str]:
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
        return command

    def ready_url(self) -> str:
        return f"{self.endpoint}?comp=list"

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


@attrs.frozen
class SmallPagesFactory:
    """Opens ``url`` with listing pages of ``page`` keys, so a suite's paging test crosses
    pages in a few hundred keys; picklable, for the suite's race workers (a class in a test
    module is not importable in them)."""

    url: str
    page: int = 100

    def __call__(self) -> OneLakeStorage:
        return open_storage(self.url, list_page_size=self.page)
