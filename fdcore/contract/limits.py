"""The contract's bounds on what an operator sets: the most attempts a request may be given, and
the size bound of a mailbox file every reader and writer keeps to; and the cadence of an agent's
record, which its writer keeps and its readers judge it by.

The agent (``[pipeline] max_attempts``, ``[agent] max_file_bytes``), the commands
(``submit --max-attempts``, ``$FDCORE_MAX_FILE_BYTES``), :class:`fdcore.environment.Environment`
and a table process keep these, through the checks of :mod:`fdcore.settings.checks`.
"""

from __future__ import annotations

from fdcore.contract.codec import FILE_BYTES_RANGE, MAX_FILE_BYTES

__all__ = [
    "FILE_BYTES_RANGE",
    "HEARTBEAT_SHARE",
    "IDLE_HEARTBEAT_SHARE",
    "MAX_ATTEMPTS",
    "MAX_FILE_BYTES",
]

#: The most attempts a request may be given ([pipeline] max_attempts, ``submit --max-attempts``).
MAX_ATTEMPTS = 1000

#: An agent rewrites its record once this share of its ``stale_after`` has passed since the last
#: write (readers take a version much sooner than that for news, and read it).
HEARTBEAT_SHARE = 0.25
#: The same while it holds nothing: nobody can take anything over from it, and its record stays
#: live in every reader's eyes (docs/operations.md, "What a fleet costs").
IDLE_HEARTBEAT_SHARE = 0.5
