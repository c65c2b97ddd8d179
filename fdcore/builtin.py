"""The implementations that ship inside the core distribution, registered as plugin ``builtin``.

Memory storage (tests and the simulator), the mailbox lease provider, the command and Python table
runners, and the log notifier. Everything else comes from plugin distributions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fdcore.hookspecs import hookimpl
from fdcore.leases import LeaseProvider
from fdcore.mailbox_leases import MailboxLeaseProvider
from fdcore.memory import MemoryStorage
from fdcore.notify import Notification, Notifier
from fdcore.runners import CommandRunner, PythonRunner, TableRunner
from fdcore.storage import StorageBackend

log = logging.getLogger("fdcore.notify")


class MemoryBackend:
    """``memory://<name>``: one process's in-memory store."""

    name = "memory"

    def accepts(self, url: str) -> bool:
        return url.startswith("memory://")

    def open(self, url: str, options: dict[str, str]) -> MemoryStorage:
        return MemoryStorage(url.removeprefix("memory://") or "default")


class _LogChannel:
    def __init__(self, route: str) -> None:
        self.route = route

    def send(self, notification: Notification) -> None:
        log.warning(
            "[%s] incident %s (%s): %s",
            self.route,
            notification.incident_id,
            notification.severity,
            notification.title,
        )


class LogNotifier:
    """``log``: write notifications to the agent's log."""

    name = "log"

    def open(self, route: str, options: dict[str, Any]) -> _LogChannel:
        return _LogChannel(route)


@hookimpl
def fdcore_storage_backends() -> Sequence[StorageBackend]:
    return [MemoryBackend()]


@hookimpl
def fdcore_lease_providers() -> Sequence[LeaseProvider]:
    return [MailboxLeaseProvider()]


@hookimpl
def fdcore_table_runners() -> Sequence[TableRunner]:
    return [CommandRunner(), PythonRunner()]


@hookimpl
def fdcore_notifiers() -> Sequence[Notifier]:
    return [LogNotifier()]
