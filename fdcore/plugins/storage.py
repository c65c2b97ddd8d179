"""An agent's environment opened from its settings: the storage backend its URL and ``[storage]``
options name, any mistake one line naming the agent's file (``fdcore run``, ``fdcore config
check``, the incident watch)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fdcore.abc import Storage
from fdcore.errors import ConfigError
from fdcore.plugins.manager import Plugins
from fdcore.settings.agent_toml import AgentConfig

__all__ = ["check_environment", "open_environment"]


def open_environment(config: AgentConfig, plugins: Plugins, *, create: bool = False) -> Storage:
    """The agent's environment, opened with its ``[storage]`` options."""
    with _naming_the_file(config):
        return plugins.open_storage(
            config.environment, dict(config.storage_options), config.storage_backend, create=create
        )


def check_environment(config: AgentConfig, plugins: Plugins) -> None:
    """What opening the agent's environment checks before any I/O: its backend is installed
    and takes the URL and the ``[storage]`` options (``fdcore config check``)."""
    with _naming_the_file(config):
        plugins.check_storage(
            config.environment, dict(config.storage_options), config.storage_backend
        )


@contextlib.contextmanager
def _naming_the_file(config: AgentConfig) -> Iterator[None]:
    """An option or a URL the backend refuses names the agent's file and its key, as every
    other agent.toml mistake does (the backend knows only the URL, its errors' source)."""
    try:
        yield
    except ConfigError as exc:
        if exc.source == config.source:
            raise
        if (exc.key or "").startswith("[storage]"):
            raise ConfigError(config.source, exc.key, exc.message) from None
        where = " ".join(part for part in (exc.source, exc.key) if part)
        raise ConfigError(config.source, "[agent] environment", f"{where}: {exc.message}") from None
