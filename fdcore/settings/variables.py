"""The environment variables an operator sets for fdcore's commands, read by the checks their
keys take.

``$FDCORE_MAX_FILE_BYTES`` bounds every mailbox read of the commands, the monitor and
:class:`fdcore.environment.Environment`, and is the default of ``[agent] max_file_bytes``. It is
the variable a table process is told its agent's bound in (:mod:`.table_process`), read the same
way.
"""

from __future__ import annotations

import os

from fdcore.contract.limits import MAX_FILE_BYTES
from fdcore.settings.table_process import variables

__all__ = ["FILE_BOUND_VARIABLE", "operator_file_bound"]

_FILE_BOUND = variables()["max_file_bytes"]
#: Sets the mailbox file size bound for the commands, the monitor, and agents whose agent.toml
#: does not set ``[agent] max_file_bytes``.
FILE_BOUND_VARIABLE = _FILE_BOUND.name


def operator_file_bound() -> int:
    """The size bound of a mailbox read an operator set in $FDCORE_MAX_FILE_BYTES, else 1 MiB;
    within FILE_BYTES_RANGE (a file over it is reported and never read)."""
    text = os.environ.get(FILE_BOUND_VARIABLE)
    if text is None:
        return MAX_FILE_BYTES
    bound: int = _FILE_BOUND.read(text)
    return bound
