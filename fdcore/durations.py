"""Durations as a person types them: agent.toml's values, every command's flags, a schedule.

Durations are text: ``"15m"``, ``"1h30m"``, ``"2s"``, ``"0.5s"``. One syntax everywhere
(schedule intervals, deadlines, poll periods): numbers each followed by a unit, ``d``, ``h``,
``m`` or ``s``, from the largest unit to the smallest, each unit at most once. A bare number is
refused: ``"15"`` could mean seconds or minutes.

The checks a value is held to (a duration's bounds among them) are in
:mod:`fdcore.settings.checks`, the one place every reader takes them from.
"""

from __future__ import annotations

import re

from fdcore.errors import DurationError

__all__ = [
    "MAX_SECONDS",
    "MAX_SPAN",
    "format_duration",
    "parse_duration",
]

UNITS: dict[str, int] = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_UNIT_HINT = "use s, m, h, d"
_PART = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]*)")


def parse_duration(text: str) -> float:
    """The number of seconds ``text`` stands for; DurationError if it is not a duration."""
    if not isinstance(text, str):
        raise DurationError(text, 'must be a text like "15m"')
    if not text.strip():
        raise DurationError(text, 'is empty (write a number and a unit, like "15m")')
    total = 0.0
    seen: list[str] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _PART.match(stripped, position)
        if match is None:
            rest = stripped[position:].strip()
            raise DurationError(text, f"expected a number at {rest!r}")
        number, unit = match.groups()
        if not unit:
            raise DurationError(text, f"missing unit after {number} ({_UNIT_HINT})")
        if unit not in UNITS:
            raise DurationError(text, f"unknown unit {unit!r} ({_UNIT_HINT})")
        if unit in seen:
            raise DurationError(text, f"unit {unit!r} given twice")
        if seen and UNITS[unit] > UNITS[seen[-1]]:
            raise DurationError(text, "write the units from largest to smallest (d, h, m, s)")
        seen.append(unit)
        total += float(number) * UNITS[unit]
        position = match.end()
    return total


def format_duration(seconds: float) -> str:
    """The canonical text of a duration: ``21600`` is ``"6h"``, ``5400`` is ``"1h30m"``.

    ``parse_duration(format_duration(x)) == x`` for any ``x >= 0`` given in whole microseconds.
    """
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative: {seconds}")
    whole, micros = divmod(round(seconds * 1_000_000), 1_000_000)
    parts: list[str] = []
    for unit, size in UNITS.items():
        count, whole = divmod(whole, size)
        if unit == "s" and micros:
            parts.append(f"{count}.{micros:06d}".rstrip("0") + "s")
        elif count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


#: Every duration a person types, and every span of seconds a mailbox file states, is finite and
#: at most ten years: the longest ``[retention] keep`` an operator may want (any longer, turn
#: retention off), and far below what times computed from it need (now + ten years is nowhere
#: near the codec's year-9000 bound, nor a thread wait's limit). One bound, so a value an agent
#: may write (``stale_after`` in its record) is always one every reader accepts.
MAX_SECONDS = 10 * 365 * 86400
#: :data:`MAX_SECONDS` in words, for the errors.
MAX_SPAN = "10 years"
