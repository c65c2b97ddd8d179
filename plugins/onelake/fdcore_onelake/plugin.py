"""Entry point of fdcore-onelake: registers the ``onelake`` storage backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fdcore import hookimpl
from fdcore.abc import StorageBackend, open_marked
from fdcore_onelake.credentials import EMULATOR_ACCOUNT, resolve_credential
from fdcore_onelake.urls import is_emulator_host, looks_like_azure, parse_location, redact

if TYPE_CHECKING:
    from fdcore_onelake.store import OneLakeStorage


class OneLakeBackend:
    """OneLake, ADLS Gen2 / Blob accounts, and the Azurite emulator."""

    name = "onelake"

    def accepts(self, url: str) -> bool:
        # An address like http://127.0.0.1:9000/... may be another emulator (S3, GCS): claim it
        # only for Azurite's own account; other emulator accounts name the backend in [storage].
        if not looks_like_azure(url):
            return False
        parts = urlsplit(url)
        if parts.scheme == "abfss" or not is_emulator_host((parts.hostname or "").lower()):
            return True
        return parts.path.lstrip("/").split("/", 1)[0] == EMULATOR_ACCOUNT

    def check_options(self, url: str, options: dict[str, str]) -> None:
        # no request, and not the Azure SDK: the URL, the options and the variables they name
        resolve_credential(url, parse_location(url), options)

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> OneLakeStorage:
        """Blob storage has no folders: an environment is a folder holding the marker ``fdcore
        init`` wrote. Without ``create``, one request checks it is there (a typo'd folder is
        EnvironmentNotFound, never an empty environment); with it, the caller's rights are
        proved on a probe blob, then the marker written. Containers are never created."""
        from fdcore_onelake.store import open_storage  # the Azure SDK only when opened

        storage = open_storage(url, options)
        open_marked(storage, redact(url), create=create)
        return storage


@hookimpl
def fdcore_storage_backends() -> Sequence[StorageBackend]:
    return [OneLakeBackend()]
