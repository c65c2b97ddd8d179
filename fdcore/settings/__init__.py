"""Settings: every value a person sets, declared once and checked once.

- :mod:`.checks`: every check a value is held to (:class:`~.checks.Whole`,
  :class:`~.checks.Seconds`, :class:`~.checks.Duration`, ...), the one vocabulary agent.toml's
  keys, the commands' flags (:func:`~.checks.add_flag`), the simulator's scenario and the
  environment variables share.
- :mod:`.declare`: the declaration engine: attrs classes whose fields carry their default, check
  and help (:func:`~.declare.setting`), read strictly into one-line errors, described as a JSON
  Schema and as the reference tables of the docs.
- :mod:`.agent_toml`: agent.toml, declared with it, and the agent's :class:`AgentConfig`.
- :mod:`.table_process` and :mod:`.variables`: the ``FDCORE_*`` variables a table process is
  told and an operator sets.

Plugins import the checks from here (a command's flags, a plugin's options).

Layer 2: imports :mod:`fdcore.errors`, :mod:`fdcore.durations`, :mod:`fdcore.webhook` and
:mod:`fdcore.contract`.
"""

from __future__ import annotations

from fdcore.settings.checks import (
    GRACE,
    AnId,
    Check,
    Duration,
    FileBound,
    Invalid,
    NonEmpty,
    Number,
    OneOf,
    Portion,
    Seconds,
    Text,
    TimeZone,
    Whole,
    add_flag,
)

__all__ = [
    "GRACE",
    "AnId",
    "Check",
    "Duration",
    "FileBound",
    "Invalid",
    "NonEmpty",
    "Number",
    "OneOf",
    "Portion",
    "Seconds",
    "Text",
    "TimeZone",
    "Whole",
    "add_flag",
]
