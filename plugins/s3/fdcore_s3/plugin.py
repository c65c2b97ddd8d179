"""Entry point of fdcore-s3: registers the ``s3`` storage backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fdcore import hookimpl
from fdcore.abc import StorageBackend, open_marked
from fdcore_s3.location import looks_like_s3, parse_location

if TYPE_CHECKING:
    from fdcore_s3.store import S3Storage


class S3Backend:
    """``s3://bucket/folder`` on AWS S3 or a store that speaks its API (``endpoint_url``)."""

    name = "s3"

    def accepts(self, url: str) -> bool:
        return looks_like_s3(url)

    def check_options(self, url: str, options: dict[str, str]) -> None:
        parse_location(url, options)  # no request: the URL and the options only

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> S3Storage:
        """A bucket has no folders: an environment is a folder holding the marker ``fdcore
        init`` wrote. Without ``create``, one listing checks it is there (a typo'd folder is
        EnvironmentNotFound, never an empty environment); with it, the caller's rights are
        proved on a probe key, then the marker written. Buckets are never created."""
        from fdcore_s3.store import S3Storage  # boto3 only when opened

        storage = S3Storage(parse_location(url, options))
        open_marked(storage, url, create=create)
        return storage


@hookimpl
def fdcore_storage_backends() -> Sequence[StorageBackend]:
    return [S3Backend()]
