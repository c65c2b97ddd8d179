"""The hook implementations of plugin ``builtin``: what the core distribution provides itself."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore.abc import LeaseProvider, Notifier, StorageBackend, TableRunner
from fdcore.builtin.leases import MailboxLeaseProvider
from fdcore.builtin.memory import MemoryBackend
from fdcore.builtin.notifiers import LogNotifier
from fdcore.builtin.runners import CommandRunner, PythonRunner
from fdcore.plugins.hookspecs import hookimpl


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
