"""Entry point of fdcore-localfs: registers the ``file`` storage backend."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import StorageBackend
from fdcore.errors import ConfigError
from fdcore_localfs.store import LocalFolderStorage, path_from_url


class LocalFolderBackend:
    name = "file"

    def accepts(self, url: str) -> bool:
        return url.startswith("file://") or "://" not in url

    def check_options(self, url: str, options: dict[str, str]) -> None:
        unknown = sorted(set(options) - {"backend"})
        if unknown:  # a local folder needs no option: a key here is a mistake, said at once
            name = unknown[0]
            raise ConfigError.unknown_key(
                url, f"[storage] {name}", name, ["backend"], "unknown option for the file backend"
            )

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> LocalFolderStorage:
        self.check_options(url, options)
        return LocalFolderStorage(path_from_url(url), url=url, create=create)


@hookimpl
def fdcore_storage_backends() -> Sequence[StorageBackend]:
    return [LocalFolderBackend()]
