"""fdcore-s3: a mailbox in a folder of an S3 bucket, or of a store that speaks S3."""

from fdcore.retry import RetryPolicy
from fdcore_s3.location import Location, parse_location
from fdcore_s3.store import S3Storage

__all__ = ["Location", "RetryPolicy", "S3Storage", "parse_location"]
