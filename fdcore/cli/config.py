"""``agent.toml``: read, checked against its declaration, typed. Every mistake is one line
naming the file, the table and the key.

The file is declared once, in :mod:`fdcore.settings.agent_toml` (:class:`AgentToml`): its keys,
defaults and checks. A schedule's timing keys are the names of the installed slot functions
(``every``, ``cron``, ``daily``, ``weekly`` from fdcore-slots, or a plugin's own), so reading
one needs the plugins.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fdcore.errors import ConfigError, PluginError
from fdcore.plugins.manager import SLOT, Plugins, load_plugins
from fdcore.settings.agent_toml import (
    AgentConfig,
    AgentToml,
    ScheduleTable,
)
from fdcore.settings.declare import structure, tables
from fdcore.tomlfile import read_toml

__all__ = [
    "add_environment_flags",
    "declared_config",
    "load_config",
    "naming_the_file",
    "parse_config",
    "read_toml",
]


def parse_config(
    data: Mapping[str, Any], source: str = "<config>", plugins: Plugins | None = None
) -> AgentConfig:
    """Check a parsed agent.toml against its declaration and build the agent's settings.

    ``plugins`` (default: the installed ones, loaded only for a file with schedules) give the
    schedules' timing keys.
    """
    return declared_config(data, source, plugins).settings(source)


def declared_config(
    data: Mapping[str, Any], source: str = "<config>", plugins: Plugins | None = None
) -> AgentToml:
    """A parsed agent.toml as its declared tables, every default filled in."""
    declared = structure(AgentToml, data, source)
    if declared.schedules:
        _check_schedules(source, declared.schedules, plugins or load_plugins())
    return declared


def _check_schedules(source: str, schedules: Sequence[ScheduleTable], plugins: Plugins) -> None:
    """Each schedule: a new id, and exactly one timing key, an installed slot function's name."""
    timings = list(plugins.implementations(SLOT))
    seen: set[str] = set()
    for index, table in enumerate(schedules):
        where = f"[[schedules]] #{index + 1}"
        for key in table.timing:
            _check_timing_key(source, f"{where} {key}", key, timings, plugins)
        if table.id in seen:
            raise ConfigError(source, f"{where} id", f"schedule {table.id!r} appears twice")
        seen.add(table.id)
        if len(table.timing) != 1:
            known = ", ".join(timings) or "the slot functions' keys (none is installed)"
            raise ConfigError(source, f"{where} ({table.id})", f"needs exactly one of {known}")


def _check_timing_key(
    source: str, where: str, key: str, timings: list[str], plugins: Plugins
) -> None:
    if key in timings:
        return
    if key in SLOT.ours:  # one of ours, not installed: say which distribution has it
        plugins.get(SLOT, key)
    raise ConfigError.unknown_key(
        source, where, key, [*tables(AgentToml)["[[schedules]]"], *timings]
    )


@contextlib.contextmanager
def naming_the_file(source: str) -> Iterator[None]:
    """A plugin a file's setting names but no installed plugin provides: the one line names the
    file too, as every other mistake in it does (the plugin manager knows only the setting)."""
    try:
        yield
    except PluginError as exc:
        if str(exc).startswith(f"{source}: "):
            raise
        raise PluginError(f"{source}: {exc}") from None


def storage_option(text: str) -> tuple[str, str]:
    """A command line's ``--option KEY=VALUE``: one key of ``[storage]`` (argparse type)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def add_environment_flags(parser: argparse.ArgumentParser) -> None:
    """``--env`` or ``--config``, exactly one: the environment a command acts on, named as
    :func:`fdcore.environment.named.resolve` reads it (an agent.toml given with ``--config``
    brings its ``[storage]`` options too)."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--env", help="environment URL, or the name of one in the environments file")
    group.add_argument(
        "--config", dest="env", metavar="AGENT_TOML", help="the environment of agent.toml"
    )


def load_config(path: str | Path, plugins: Plugins | None = None) -> AgentConfig:
    """Read and validate ``path``; a missing file or bad TOML is a one-line ConfigError too.

    ``plugins`` (default: the installed ones) give the schedules' timing keys.
    """
    return parse_config(read_toml(path, "an agent.toml"), str(path), plugins)
