"""The plugins as the core sees them, for a plugin's tests: load the installed ones (and yours,
not installed: ``load_plugins(extra=[(name, plugin)])``), and ask for an implementation by kind
and name as an agent does (``plugins.get(CLAIM, "one_at_a_time")``). ``ENTRY_POINT_GROUP`` is
the group a distribution's entry points register in; ``DISABLE_VARIABLE`` the variable that
keeps installed plugins from loading (comma-separated entry-point or distribution names)."""

from __future__ import annotations

from fdcore.plugins.manager import (
    CLAIM,
    COMMAND,
    DISABLE_VARIABLE,
    ENTRY_POINT_GROUP,
    HOST,
    LEASES,
    NOTIFIER,
    RUNNER,
    SLOT,
    STORAGE,
    TAKEOVER,
    Kind,
    Plugins,
    load_plugins,
)

__all__ = [
    "CLAIM",
    "COMMAND",
    "DISABLE_VARIABLE",
    "ENTRY_POINT_GROUP",
    "HOST",
    "LEASES",
    "NOTIFIER",
    "RUNNER",
    "SLOT",
    "STORAGE",
    "TAKEOVER",
    "Kind",
    "Plugins",
    "load_plugins",
]
