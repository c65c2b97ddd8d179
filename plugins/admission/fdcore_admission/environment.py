"""What a queued row keeps of the environment it was enqueued with.

This is name-based minimisation, not secret detection: a variable is kept when its name starts
with an allowed prefix and does not look like a secret's name. A secret stored under an innocent
name (``FDCORE_NOTE=hunter2``) is kept; keep secrets out of the allowed prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fdcore_admission.errors import AdmissionRefused

DEFAULT_PREFIXES = ("FDCORE_", "LANG", "LC_", "TZ", "PATH")
# any of these in a name (case-insensitive) drops the variable
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CONNECTION_STRING", "CONNSTR")
MAX_VALUE_CHARS = 4096  # a value this long or longer is refused: 4,095 characters are kept


def minimise(
    environment: Mapping[str, str], prefixes: Iterable[str] = DEFAULT_PREFIXES
) -> dict[str, str]:
    """The variables of ``environment`` a row may keep; refuse a kept value that is too long."""
    allowed = tuple(prefixes)
    kept: dict[str, str] = {}
    for name, value in environment.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise AdmissionRefused("ADMISSION_ENTRY_INVALID", f"environment {name!r}: not text")
        if not name.startswith(allowed) or any(word in name.upper() for word in SECRET_WORDS):
            continue
        if len(value) >= MAX_VALUE_CHARS:
            raise AdmissionRefused(
                "ADMISSION_ENV_VALUE_TOO_LONG",
                f"environment {name}: {len(value)} characters, at most {MAX_VALUE_CHARS - 1}",
            )
        kept[name] = value
    return kept
