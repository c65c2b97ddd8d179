"""Entry point of fdcore-localfs: registers the ``file`` storage backend."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import StorageBackend
from fdcore_localfs.store import LocalFolderStorage, path_from_url


class LocalFolderBackend:
    name = "file"

    def accepts(self, url: str) -> bool:
        return url.startswith("file://") or "://" not in url

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> LocalFolderStorage:
        return LocalFolderStorage(path_from_url(url), url=url, create=create)


@hookimpl
def fdcore_storage_backends() -> Sequence[StorageBackend]:
    return [LocalFolderBackend()]
