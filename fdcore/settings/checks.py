"""Every check a value a person sets is held to, written once.

agent.toml's keys (:func:`fdcore.settings.declare.setting`), every command's flags
(:func:`add_flag`), ``fdcore simulate``'s scenario, a table process's ``FDCORE_*`` variables
and the operator's ``$FDCORE_MAX_FILE_BYTES`` all apply these, so a value means the same
wherever it is typed and a bad one is one line naming where (``fdcore queue: --grace: must
be ...``, ``agent.toml: [agent] poll_seconds: must be ...``).

A :class:`Check` is used three ways: :meth:`Check.check` a value (a ConfigError naming its
``source`` and ``key``); :meth:`Check.read` a text (a flag's, a variable's) then check it; or as
an attrs validator of a declared field (a failure is :class:`Invalid`, naming the field).
"""

from __future__ import annotations

import argparse
import copy
import math
from collections.abc import Callable, Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from fdcore.contract.codec import FILE_BYTES_RANGE
from fdcore.contract.ids import validate_id
from fdcore.durations import MAX_SECONDS, MAX_SPAN, format_duration, parse_duration
from fdcore.errors import ConfigError, DurationError, InvalidId

__all__ = [
    "GRACE",
    "AnId",
    "Check",
    "Duration",
    "FileBound",
    "Invalid",
    "NonEmpty",
    "Number",
    "OneOf",
    "PerName",
    "Portion",
    "Seconds",
    "Text",
    "TextCheck",
    "TimeZone",
    "Whole",
    "add_flag",
    "check_duration",
    "check_number",
    "check_seconds",
    "check_whole",
]


class Invalid(ConfigError):
    """A declared field's check failed: ``path`` (the keys below the class checked) and why.
    The declaration's reader (:func:`fdcore.settings.declare.structure`) names the file too."""

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        self.path = path
        super().__init__(".".join(path) or "value", None, message)


class Check:
    """One rule a value keeps. Subclasses say the rule (:meth:`check`), how a text becomes a
    value (:meth:`parse`: a number, unless said otherwise) and its JSON Schema keywords
    (:attr:`bounds`)."""

    source = "fdcore"
    key: str | None = None
    #: The value a flag declared with this check takes when not given (None: no default).
    default: Any = None

    def _rule(self) -> tuple[Any, ...]:
        """What the check holds a value to: its kind and its parameters (not where it is read)."""
        rule = {k: v for k, v in vars(self).items() if k not in ("source", "key")}
        return (type(self), *sorted(rule.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Check) and self._rule() == other._rule()

    def __hash__(self) -> int:
        return hash(self._rule())

    def bind(self, source: str, key: str | None) -> Check:
        """This check, its errors naming ``source`` and ``key`` (a command and its flag)."""
        bound = copy.copy(self)
        bound.source, bound.key = source, key
        return bound

    @property
    def bounds(self) -> dict[str, Any]:
        return {}

    def fail(self, message: str) -> ConfigError:
        return ConfigError(self.source, self.key, message)

    def parse(self, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            raise self.fail(f"expected a number, got {text!r}") from None

    def check(self, value: Any) -> Any:
        """``value`` if it keeps the rule; a ConfigError naming ``source`` and ``key`` else."""
        raise NotImplementedError

    def read(self, text: str) -> Any:
        """A typed text's value (a flag's: the argparse ``type``), checked."""
        return self.check(self.parse(text))

    def __call__(self, _instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        """As an attrs validator: None (not set) passes; a failure names the field."""
        if value is None:
            return
        try:
            self.check(value)
        except ConfigError as exc:
            raise Invalid((attribute.name,), exc.message) from None


class TextCheck(Check):
    """A check of a value typed as text (a name, a duration): a flag's text is the value."""

    def parse(self, text: str) -> str:
        return text


# -- numbers -------------------------------------------------------------------------------------


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


def check_whole(source: str, key: str | None, value: object, low: int, high: int | None) -> int:
    """A whole number from ``low`` to ``high`` (None: no bound; not a boolean); a ConfigError
    otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(source, key, f"must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        digits = str(abs(value))
        shown = str(value) if len(digits) <= 20 else f"a number of {len(digits)} digits"
        within = f"at least {low}" if high is None else f"{low}..{high}"
        raise ConfigError(source, key, f"must be {within}, got {shown}")
    return value


def check_duration(
    source: str,
    key: str | None,
    value: object,
    maximum: float = MAX_SECONDS,
    span: str = MAX_SPAN,
    minimum: float = 0.0,
) -> float:
    """A duration (a text such as ``"15m"``, or seconds) of more than 0, at least ``minimum``,
    at most ``maximum`` seconds (``span`` says it in words); a ConfigError otherwise."""
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except DurationError as exc:
            raise ConfigError(source, key, str(exc)) from None
        shown = value[:40]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
        shown = format_duration(seconds) if 0 <= seconds < 1e15 else f"{seconds:g}s"
    else:
        raise ConfigError(source, key, f'must be a duration such as "15m", got {value!r}')
    if minimum and seconds < minimum:
        raise ConfigError(source, key, f"must be at least {format_duration(minimum)}, got {shown}")
    if not 0 < seconds <= maximum:  # also a text of more digits than a float holds (inf)
        most = span or format_duration(maximum)
        raise ConfigError(source, key, f"must be greater than 0 and at most {most}, got {shown}")
    return seconds


class Seconds(Check):
    """A number of seconds (``--grace 60``, ``poll_seconds = 5``)."""

    def __init__(
        self, minimum: float = 0.0, *, zero_allowed: bool = False, maximum: float = MAX_SECONDS
    ) -> None:
        self.minimum, self.zero_allowed, self.maximum = minimum, zero_allowed, maximum

    @property
    def bounds(self) -> dict[str, Any]:
        # (more than 0 is said in words: draft 4 has no such keyword)
        least = {"minimum": self.minimum} if self.minimum > 0 or self.zero_allowed else {}
        return {**least, "maximum": self.maximum}

    def check(self, value: float) -> float:
        return check_seconds(
            self.source,
            self.key,
            value,
            self.minimum,
            zero_allowed=self.zero_allowed,
            maximum=self.maximum,
        )


class Number(Check):
    """A number from ``low`` to ``high`` (a share, a rate)."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    @property
    def bounds(self) -> dict[str, Any]:
        return {"minimum": self.low, "maximum": self.high}

    def check(self, value: float) -> float:
        return check_number(self.source, self.key, value, self.low, self.high)


class Portion(Check):
    """A share of more than 0 and at most 1 (a success rate)."""

    @property
    def bounds(self) -> dict[str, Any]:
        return {"maximum": 1}  # (more than 0 is said in words: draft 4 has no such keyword)

    def check(self, value: float) -> float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not 0 < value <= 1:
            raise self.fail(f"must be in (0, 1], got {value!r}")
        return value


class Whole(Check):
    """A whole number from ``low`` to ``high`` (a count, a port; None: no greatest)."""

    def __init__(self, low: int, high: int | None = None) -> None:
        self.low, self.high = low, high

    @property
    def bounds(self) -> dict[str, Any]:
        most = {} if self.high is None else {"maximum": self.high}
        return {"minimum": self.low, **most}

    def parse(self, text: str) -> int:
        try:
            return int(text.strip(), 10)
        except ValueError:  # not digits, or more digits than Python converts
            raise self.fail(f"expected a whole number, got {text[:40]!r}") from None

    def check(self, value: object) -> int:
        return check_whole(self.source, self.key, value, self.low, self.high)


class FileBound(Whole):
    """A mailbox read's size bound, in bytes: within the contract's FILE_BYTES_RANGE (a bigger
    file is never read)."""

    def __init__(self) -> None:
        super().__init__(*FILE_BYTES_RANGE)

    def check(self, value: object) -> int:
        whole = isinstance(value, int) and not isinstance(value, bool)
        if not whole or not self.low <= value <= self.high:  # type: ignore[operator]
            raise self.fail(f"must be {self.low}..{self.high} bytes, got {value!r}")
        return value  # type: ignore[return-value]


class Duration(TextCheck):
    """A duration (``--keep 7d``; ``every = "1h"``): text, or seconds once read, of more than 0,
    at least ``minimum``, at most ``maximum``."""

    def __init__(
        self, minimum: float = 0.0, maximum: float = MAX_SECONDS, span: str = MAX_SPAN
    ) -> None:
        self.minimum, self.maximum, self.span = minimum, maximum, span

    @property
    def bounds(self) -> dict[str, Any]:
        return {"minimum": self.minimum} if self.minimum else {}

    def check(self, value: object) -> float:
        return check_duration(
            self.source, self.key, value, self.maximum, self.span, minimum=self.minimum
        )


class _Grace(Seconds):
    default = 60.0


#: A grace in seconds: ``[pipeline] grace_seconds`` and every command's ``--grace``, with its
#: default (the one place 60 s is written).
GRACE: Seconds = _Grace(zero_allowed=True)


# -- texts ---------------------------------------------------------------------------------------


class OneOf(TextCheck):
    """The value (or each of its items) is one of ``choices`` (or of what ``choices()`` gives:
    the installed plugins' names, known only when checked)."""

    def __init__(
        self, choices: Sequence[str] | Callable[[], Sequence[str]], what: str = "value"
    ) -> None:
        self.choices, self.what = choices, what

    @property
    def known(self) -> tuple[str, ...]:
        return tuple(self.choices() if callable(self.choices) else self.choices)

    @property
    def bounds(self) -> dict[str, Any]:
        return {} if callable(self.choices) else {"enum": list(self.known)}

    def check(self, value: Any) -> Any:
        known = self.known
        for item in [value] if isinstance(value, str) else value:
            if item not in known:
                listed = ", ".join(known) or "none installed"
                raise self.fail(f"unknown {self.what} {item!r} (known: {listed})")
        return value


class AnId(TextCheck):
    """An id of the contract (an agent's name, a table's, a schedule's), or a list of them."""

    def __init__(self, what: str) -> None:
        self.what = what

    def check(self, value: Any) -> Any:
        for item in [value] if isinstance(value, str) else value:
            try:
                validate_id(item, self.what)
            except InvalidId as exc:
                raise self.fail(str(exc)) from None
        return value


class Text(TextCheck):
    """A text a person reads back (an owner, an identity): 1 to ``most`` printable characters."""

    def __init__(self, most: int) -> None:
        self.most = most

    def check(self, value: str) -> str:
        if not value.strip() or len(value) > self.most or not value.isprintable():
            raise self.fail(f"expected 1..{self.most} printable characters, got {value[:40]!r}")
        return value


class TimeZone(TextCheck):
    """An IANA time zone name (``"Europe/Berlin"``)."""

    def check(self, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ValueError, TypeError, OSError, ZoneInfoNotFoundError):
            raise self.fail(f"unknown IANA time zone {value!r}") from None
        return value


class NonEmpty(Check):
    """A list of strings with at least one (a command and its arguments)."""

    def check(self, value: Sequence[str]) -> Sequence[str]:
        if not value:
            raise self.fail("expected a non-empty list of strings")
        return value


# -- the flags of the commands: read by the checks above, so a flag means what its key does ----


def add_flag(
    parser: argparse.ArgumentParser, name: str, check: Check, **options: Any
) -> argparse.Action:
    """Declare the number flag (or positional) ``name`` of ``parser``, read by ``check`` (and
    defaulting to the check's default, if it has one)."""
    if check.default is not None:
        options.setdefault("default", check.default)
    return parser.add_argument(name, type=check.bind(parser.prog, name).read, **options)


class PerName(Check):
    """``NAME=VALUE`` pairs (``--agent-speed agent-1=0.5``): each value held to ``value``'s
    check; ``words`` say the form in an error (``NAME=FACTOR (e.g. agent-1=0.5)``)."""

    def __init__(self, value: Check, words: str) -> None:
        self.value, self.words = value, words

    def parse(self, text: str) -> tuple[str, Any]:
        name, equals, value = text.partition("=")
        try:
            if not equals or not name:
                raise ConfigError(self.source, self.key, "")
            return name, self.value.bind(self.source, self.key).parse(value)
        except ConfigError:
            raise self.fail(f"expected {self.words}, got {text!r}") from None

    def check(self, value: tuple[str, Any]) -> tuple[str, Any]:
        name, item = value
        try:
            self.value.bind(self.source, self.key).check(item)
        except ConfigError as exc:
            raise self.fail(f"{name}: {exc.message}") from None
        return value

    def __call__(self, instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        for pair in value:
            super().__call__(instance, attribute, pair)
