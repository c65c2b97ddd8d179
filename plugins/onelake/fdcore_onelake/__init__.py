"""fdcore-onelake: a mailbox in a OneLake or ADLS Gen2 folder (and the Azurite emulator)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fdcore.retry import RetryPolicy
from fdcore_onelake.urls import Location, parse_location

if TYPE_CHECKING:
    from fdcore_onelake.store import OneLakeStorage, open_storage

__all__ = ["Location", "OneLakeStorage", "RetryPolicy", "open_storage", "parse_location"]


def __getattr__(name: str) -> Any:
    # The Azure SDK takes most of a second to import: only a process that opens this storage
    # pays for it, not every command that loads the plugins.
    if name in ("OneLakeStorage", "open_storage"):
        from fdcore_onelake import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
