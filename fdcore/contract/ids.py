"""Ids that become file names in the mailbox (requests, agents, tables, schedules)."""

from __future__ import annotations

import re

from fdcore.errors import InvalidId

__all__ = [
    "ID_PATTERN",
    "is_valid_id",
    "validate_id",
]

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def validate_id(value: object, what: str = "id", field: str | None = None) -> str:
    """Return ``value`` if it is a valid id; raise :class:`InvalidId` naming ``what`` otherwise.

    ``field`` names the model field being checked, so a mailbox file error can point at it.
    """
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidId(
            f"invalid {what} {value!r}: must match {ID_PATTERN.pattern} "
            "(letters, digits, '.', '_', '-'; starting with a letter or digit; at most 128)",
            field,
        )
    return value


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None
