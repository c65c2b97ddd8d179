"""fdcore-onelake: a mailbox in a OneLake or ADLS Gen2 folder (and the Azurite emulator)."""

from fdcore.retry import RetryPolicy
from fdcore_onelake.store import OneLakeStorage, open_storage
from fdcore_onelake.urls import Location, parse_location

__all__ = ["Location", "OneLakeStorage", "RetryPolicy", "open_storage", "parse_location"]
