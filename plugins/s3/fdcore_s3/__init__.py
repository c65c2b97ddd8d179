"""fdcore-s3: a mailbox in a folder of an S3 bucket, or of a store that speaks S3."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fdcore.retry import RetryPolicy
from fdcore_s3.location import Location, parse_location

if TYPE_CHECKING:
    from fdcore_s3.store import S3Storage

__all__ = ["Location", "RetryPolicy", "S3Storage", "parse_location"]


def __getattr__(name: str) -> Any:
    # boto3 takes about half a second to import: only a process that opens this storage pays.
    if name == "S3Storage":
        from fdcore_s3.store import S3Storage

        return S3Storage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
