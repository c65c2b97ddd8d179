"""The plugin system: the hook specifications and the manager that loads plugins.

:mod:`.hookspecs` declares every hook (all prefixed ``fdcore_``); :mod:`.manager` loads the
``fdcore`` entry-point group, calls the hooks through ``pm.hook`` and is the typed facade the core
asks for an implementation by kind and name.

:mod:`.storage` opens an agent's environment from its settings and :mod:`.routes` its
notification routes (the agent, the incident watch and the commands share both).

Layer 4: imports :mod:`fdcore.errors`, :mod:`fdcore.contract`, :mod:`fdcore.settings` and
:mod:`fdcore.abc`.

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); plugins mark
hooks with ``fdcore.hookimpl`` and read the hooks' reference in docs/plugins.md.
"""

from fdcore.plugins.hookspecs import hookimpl, hookspec
from fdcore.plugins.manager import (
    CLAIM,
    COMMAND,
    HOST,
    KINDS,
    LEASES,
    NOTIFIER,
    RUNNER,
    SLOT,
    STORAGE,
    TAKEOVER,
    Kind,
    PluginInfo,
    Plugins,
    load_plugins,
)

__all__ = [
    "CLAIM",
    "COMMAND",
    "HOST",
    "KINDS",
    "LEASES",
    "NOTIFIER",
    "RUNNER",
    "SLOT",
    "STORAGE",
    "TAKEOVER",
    "Kind",
    "PluginInfo",
    "Plugins",
    "hookimpl",
    "hookspec",
    "load_plugins",
]
