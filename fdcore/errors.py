"""Errors a user meets: each renders as one line that says what was wrong and where."""

from __future__ import annotations


class FdcoreError(Exception):
    """Base of every error fdcore raises on purpose; its str() is a complete one-line message."""


class ConfigError(FdcoreError):
    """A configuration file or value is wrong: names the file and the key."""

    def __init__(self, source: str, key: str | None, message: str) -> None:
        self.source = source
        self.key = key
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {message}")


class MailboxFileError(FdcoreError):
    """A file read from the mailbox is malformed: names the file and the field."""

    def __init__(self, path: str, field: str | None, message: str) -> None:
        self.path = path
        self.field = field
        where = f"{path}: field '{field}'" if field else path
        super().__init__(f"{where}: {message}")


class InvalidId(FdcoreError, ValueError):
    """An id that would become a file name does not match the allowed pattern."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class PluginError(FdcoreError):
    """A plugin failed to load, or no installed plugin provides what was asked for."""
