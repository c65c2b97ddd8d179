"""Where an environment is, with its storage options, named once: a URL as it is, a named
environment of the user's environments file (``fdcore queue --env prod``, as kubeconfig
contexts and AWS profiles), or an agent.toml's ``[agent] environment`` and ``[storage]``.

The environments file is ``$FDCORE_ENVIRONMENTS``, else ``$XDG_CONFIG_HOME/fdcore/
environments.toml`` (``~/.config/fdcore/environments.toml``); each table is one environment::

    [prod]
    url = "s3://acme-data/fdcore/prod"
    [prod.storage]
    endpoint_url = "https://minio.acme.internal:9000"
    addressing_style = "path"

A name is a bare word (no ``/`` and no ``://``) that the file defines; an existing ``.toml`` file
is an agent.toml (what ``--config`` gives); anything else is a URL or a path, so ``./prod`` is
always the local folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from fdcore.errors import ConfigError
from fdcore.tomlfile import read_toml

__all__ = ["ENVIRONMENTS_VARIABLE", "Target", "environments_file", "from_agent_toml", "resolve"]

#: Names the user's environments file, in place of the XDG location.
ENVIRONMENTS_VARIABLE = "FDCORE_ENVIRONMENTS"


@attrs.frozen
class Target:
    """An environment's URL, its store's ``[storage]`` options and the backend, if forced."""

    url: str
    options: dict[str, str] = attrs.field(factory=dict)
    backend: str | None = None


def environments_file() -> Path:
    """``$FDCORE_ENVIRONMENTS``, else ``$XDG_CONFIG_HOME/fdcore/environments.toml``."""
    chosen = os.environ.get(ENVIRONMENTS_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fdcore" / "environments.toml"


def resolve(env: str) -> Target:
    """``env`` as an agent.toml if it is a ``.toml`` file, as a named environment of
    :func:`environments_file` if it is a bare word the file defines, else as a URL or path
    with no options."""
    if env.endswith(".toml") and Path(env).is_file():
        return from_agent_toml(env)
    if "/" in env or "://" in env or not env.strip():
        return Target(env)
    path = environments_file()
    if not path.is_file():
        return Target(env)
    document = read_toml(path, "the environments file")
    table = document.get(env)
    if table is None:
        return Target(env)
    source = f"{path} [{env}]"
    if not isinstance(table, dict):
        raise ConfigError(source, None, "expected a table with url and [storage]")
    unknown = sorted(set(table) - {"url", "storage"})
    if unknown:
        raise ConfigError(source, unknown[0], "unknown key (an environment has url and storage)")
    url = table.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(source, "url", "missing: the environment's URL")
    return _with_storage(url, source, table.get("storage", {}))


def from_agent_toml(path: str | os.PathLike[str]) -> Target:
    """The environment an agent.toml serves: ``[agent] environment`` with its ``[storage]``."""
    document = read_toml(path, "an agent.toml")
    agent = document.get("agent")
    url = agent.get("environment") if isinstance(agent, dict) else None
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(str(path), "[agent] environment", "missing: the environment's URL")
    return _with_storage(url, str(path), document.get("storage", {}))


def _with_storage(url: str, source: str, storage: Any) -> Target:
    if not isinstance(storage, Mapping):
        raise ConfigError(source, "[storage]", 'expected a table of KEY = "text"')
    for key, value in storage.items():
        if not isinstance(value, str):
            raise ConfigError(source, f"[storage] {key}", f"expected text, got {value!r}")
    options = {key: value for key, value in storage.items() if key != "backend"}
    return Target(url, options, storage.get("backend") or None)
