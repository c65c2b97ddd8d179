"""A TOML file a person wrote (agent.toml, the environments file, a price table), read whole:
every way it can be unreadable is one :class:`ConfigError` line naming the file, and nothing
deeper than :data:`MAX_DEPTH` reaches a reader that walks it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from fdcore.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["MAX_DEPTH", "read_toml"]

#: Tables and arrays nest at most this deep (an agent.toml needs 4): deeper is refused before
#: anything walks it, so no reader of the settings meets a recursion limit.
MAX_DEPTH = 32


def read_toml(path: str | os.PathLike[str], kind: str = "a TOML file") -> dict[str, Any]:
    """The TOML document in ``path``; a one-line ConfigError naming the file if it cannot be
    read, is not UTF-8 text, is not TOML, or nests deeper than :data:`MAX_DEPTH`. ``kind`` names
    the file in the message about its encoding ("an agent.toml")."""
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(source, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text (byte {exc.start}): {kind} is a UTF-8 text file"
        raise ConfigError(source, None, why) from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, None, f"not valid TOML: {exc}") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise ConfigError(source, None, f"nested deeper than {MAX_DEPTH} levels") from None
    if _depth(data) > MAX_DEPTH:
        raise ConfigError(source, None, f"nested deeper than {MAX_DEPTH} levels")
    return data


def _depth(value: Any) -> int:
    """How deep tables and arrays nest in ``value``, found without recursion (and stopping one
    level past the bound)."""
    deepest, level = 0, [value]
    while level and deepest <= MAX_DEPTH:
        deepest += 1
        level = [
            item
            for container in level
            for item in (container.values() if isinstance(container, dict) else container)
            if isinstance(item, (dict, list))
        ]
    return deepest
