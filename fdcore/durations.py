"""Durations and numbers a person types: agent.toml's values and every command's flags.

Durations are text: ``"15m"``, ``"1h30m"``, ``"2s"``, ``"0.5s"``. One syntax everywhere
(schedule intervals, deadlines, poll periods): numbers each followed by a unit, ``d``, ``h``,
``m`` or ``s``, from the largest unit to the smallest, each unit at most once. A bare number is
refused: ``"15"`` could mean seconds or minutes.

Every number is checked here, once: agent.toml's keys and the commands' flags (declared with
:func:`add_flag`) take the same checks, so a value means the same in both and a bad one is one
line naming where it was typed (invariant 14).
"""

from __future__ import annotations

import argparse
import copy
import math
import re
from typing import Any

from fdcore.errors import ConfigError, DurationError

__all__ = [
    "GRACE",
    "MAX_SECONDS",
    "Duration",
    "Number",
    "Reader",
    "Seconds",
    "Whole",
    "add_flag",
    "check_duration",
    "check_number",
    "check_seconds",
    "check_whole",
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


# -- numbers a person types: agent.toml's values and every command's flags --------------------

#: Every duration a person types, and every span of seconds a mailbox file states, is finite and
#: at most ten years: the longest ``[retention] keep`` an operator may want (any longer, turn
#: retention off), and far below what times computed from it need (now + ten years is nowhere
#: near the codec's year-9000 bound, nor a thread wait's limit). One bound, so a value an agent
#: may write (``stale_after`` in its record) is always one every reader accepts.
MAX_SECONDS = 10 * 365 * 86400
#: :data:`MAX_SECONDS` in words, for the errors.
MAX_SPAN = "10 years"


def check_seconds(
    source: str,
    key: str | None,
    value: float,
    minimum: float = 0.0,
    *,
    zero_allowed: bool = False,
    maximum: float = MAX_SECONDS,
) -> float:
    """A duration in seconds: finite, at least ``minimum`` (or > 0), at most ``maximum``; 0 too
    if ``zero_allowed``. A ConfigError naming ``source`` and ``key`` otherwise."""
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(source, key, f"must be a finite number of seconds, got {value!r}")
    if value > maximum:
        span = f" ({MAX_SPAN})" if maximum == MAX_SECONDS else ""
        raise ConfigError(source, key, f"must be at most {maximum:g}{span}, got {value:g}")
    if zero_allowed and value == 0:
        return value
    if value < minimum or value <= 0:
        least = f"at least {minimum:g}" if minimum > 0 else "greater than 0"
        if zero_allowed:
            least = f"0 or {least}" if minimum > 0 else "0 or more"
        raise ConfigError(source, key, f"must be {least}, got {value:g}")
    return value


def check_number(source: str, key: str | None, value: float, low: float, high: float) -> float:
    """A finite number from ``low`` to ``high``; a ConfigError naming ``source`` and ``key``."""
    value = float(value)
    if not (math.isfinite(value) and low <= value <= high):
        raise ConfigError(source, key, f"must be a number from {low:g} to {high:g}, got {value!r}")
    return value


def check_whole(source: str, key: str | None, value: object, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (not a boolean); a ConfigError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(source, key, f"must be a whole number, got {value!r}")
    if not low <= value <= high:
        digits = str(abs(value))
        shown = str(value) if len(digits) <= 20 else f"a number of {len(digits)} digits"
        raise ConfigError(source, key, f"must be {low}..{high}, got {shown}")
    return value


def check_duration(
    source: str, key: str | None, text: object, maximum: float = MAX_SECONDS, span: str = MAX_SPAN
) -> float:
    """A duration text (``"15m"``) of more than 0 and at most ``maximum`` seconds (``span``
    says it in words); a ConfigError naming ``source`` and ``key`` otherwise."""
    try:
        seconds = parse_duration(text)  # type: ignore[arg-type]
    except DurationError as exc:
        raise ConfigError(source, key, str(exc)) from None
    if not 0 < seconds <= maximum:  # also a text of more digits than a float holds (inf)
        most = span or format_duration(maximum)
        shown = str(text)[:40]
        raise ConfigError(source, key, f"must be greater than 0 and at most {most}, got {shown}")
    return seconds


# -- the flags of the commands: read by the checks above, so a flag means what its key does ----


class Reader:
    """How a command reads one number flag (an argparse ``type``): the text as a number
    (:meth:`parse`), then the check agent.toml's values take (:meth:`check`). Bound to its
    command and flag by :func:`add_flag`, so a bad value is one line naming both
    (``fdcore queue: --grace: must be ...``)."""

    source = "fdcore"
    flag: str | None = None
    #: The value a flag declared with this reader takes when not given (None: no default).
    default: Any = None

    def bind(self, source: str, flag: str | None) -> Reader:
        bound = copy.copy(self)
        bound.source, bound.flag = source, flag
        return bound

    def __call__(self, text: str) -> Any:
        return self.check(self.parse(text))

    def parse(self, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(self.source, self.flag, f"expected a number, got {text!r}") from None

    def check(self, value: Any) -> Any:
        raise NotImplementedError


class Seconds(Reader):
    """A number of seconds (``--grace 60``), checked as :func:`check_seconds` checks it."""

    def __init__(
        self, minimum: float = 0.0, *, zero_allowed: bool = False, maximum: float = MAX_SECONDS
    ) -> None:
        self.minimum, self.zero_allowed, self.maximum = minimum, zero_allowed, maximum

    def check(self, value: float) -> float:
        return check_seconds(
            self.source,
            self.flag,
            value,
            self.minimum,
            zero_allowed=self.zero_allowed,
            maximum=self.maximum,
        )


class Number(Reader):
    """A number from ``low`` to ``high`` (a share, a rate)."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def check(self, value: float) -> float:
        return check_number(self.source, self.flag, value, self.low, self.high)


class Whole(Reader):
    """A whole number from ``low`` to ``high`` (a count, a port)."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def parse(self, text: str) -> int:
        try:
            return int(text.strip(), 10)
        except ValueError:  # not digits, or more digits than Python converts
            raise ConfigError(
                self.source, self.flag, f"expected a whole number, got {text[:40]!r}"
            ) from None

    def check(self, value: object) -> int:
        return check_whole(self.source, self.flag, value, self.low, self.high)


class Duration(Reader):
    """A duration text (``--keep 7d``), checked as :func:`check_duration` checks it."""

    def __init__(self, maximum: float = MAX_SECONDS, span: str = MAX_SPAN) -> None:
        self.maximum, self.span = maximum, span

    def parse(self, text: str) -> str:
        return text

    def check(self, value: object) -> float:
        return check_duration(self.source, self.flag, value, self.maximum, self.span)


class _Grace(Seconds):
    default = 60.0


#: A grace in seconds: ``[pipeline] grace_seconds`` and every command's ``--grace``, with its
#: default (the one place 60 s is written).
GRACE: Seconds = _Grace(zero_allowed=True)


def add_flag(
    parser: argparse.ArgumentParser, name: str, reader: Reader, **options: Any
) -> argparse.Action:
    """Declare the number flag (or positional) ``name`` of ``parser``, read by ``reader`` (and
    defaulting to the reader's default, if it has one)."""
    if reader.default is not None:
        options.setdefault("default", reader.default)
    return parser.add_argument(name, type=reader.bind(parser.prog, name), **options)
