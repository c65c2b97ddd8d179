"""Opening an environment, and what an operator does to it: cancel or retry a request,
acknowledge an incident; and its incidents as ``fdcore incidents list`` shows them.

The commands (``fdcore cancel``, ``retry``, ``incidents``) and the monitor's buttons call these,
so an action from the page is recorded exactly as one from the terminal.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from datetime import datetime

from fdcore.contract.models import Incident
from fdcore.environment.named import Target, from_agent_toml, resolve
from fdcore.errors import ConfigError
from fdcore.incidents.book import IncidentBook, acknowledge
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.audit import process_user
from fdcore.plugins.manager import load_plugins

#: Sets the mailbox file size bound for the commands, the monitor, and agents whose agent.toml
#: does not set ``[agent] max_file_bytes``.
from fdcore.settings.variables import FILE_BOUND_VARIABLE, operator_file_bound

__all__ = [
    "FILE_BOUND_VARIABLE",
    "acknowledge_incident",
    "environment_target",
    "incidents",
    "open_mailbox",
    "operator_file_bound",
    "operator_name",
]

#: Where an environment's URL is given, for the error of a URL no installed plugin opens: the
#: Python parameter, unless the command line says it is its ``--env`` (for the command it runs).
URL_SETTING: ContextVar[str] = ContextVar("fdcore_url_setting", default="Environment.open(url)")


def open_mailbox(
    url: str | None,
    *,
    create: bool = False,
    max_file_bytes: int | None = None,
    setting: str | None = None,
    options: dict[str, str] | None = None,
    config: str | os.PathLike[str] | None = None,
) -> Mailbox:
    """The mailbox of the environment at ``url`` through its installed storage plugin, each read
    bounded by ``max_file_bytes`` (by default :func:`operator_file_bound`). ``create=False``
    (for whatever only reads or acts on what is there): a missing environment is
    :class:`~fdcore.errors.EnvironmentNotFound`, never a new empty one. ``setting`` names where
    the URL was given, for the error of a URL no installed plugin opens (default
    :data:`URL_SETTING`); ``options`` are the store's ``[storage]`` settings. ``url`` may name
    an environment of the user's environments file, or ``config`` an agent.toml to take the
    environment and its options from (:mod:`fdcore.environment.named`); ``options`` given here
    win over theirs."""
    where = setting or URL_SETTING.get()
    target = environment_target(url, config, where)
    bound = operator_file_bound() if max_file_bytes is None else max_file_bytes
    storage = load_plugins().open_storage(
        target.url,
        {**target.options, **(options or {})},
        target.backend,
        create=create,
        setting=where,
    )
    return Mailbox(storage, max_file_bytes=bound)


def environment_target(
    url: str | None, config: str | os.PathLike[str] | None, setting: str = "--env"
) -> Target:
    """Where the environment is: from ``config`` (an agent.toml) or ``url`` (a URL or a name),
    exactly one of them; ``setting`` names where the URL is given, for the error."""
    if config is not None:
        if url is not None:
            raise ConfigError(setting, None, f"give the environment once, not also {config!s}")
        return from_agent_toml(config)
    if url is None:
        raise ConfigError(setting, None, "missing: an environment URL or name (or a config)")
    return resolve(url)


def operator_name() -> str:
    """Who acts when the caller does not say: ``user@host`` (``unknown@host`` if the system
    cannot tell the user)."""
    return process_user()


def incidents(mailbox: Mailbox, include_resolved: bool = True) -> list[Incident]:
    """The open incidents, then (with ``include_resolved``) the resolved ones, newest first."""
    document = IncidentBook(mailbox).read()
    return document.open + (list(reversed(document.resolved)) if include_resolved else [])


def acknowledge_incident(mailbox: Mailbox, incident: str, now: datetime, by: str) -> Incident:
    """Acknowledge the open incident with id or key ``incident`` as ``by``
    (``fdcore incidents ack``); :class:`~fdcore.errors.ConfigError` if there is none."""
    return IncidentBook(mailbox).change(lambda d: acknowledge(d, incident, now, by))
