"""JSON (de)serialisation of the mailbox files, with unknown fields kept.

``decode`` turns bytes read from the mailbox into a model or raises one
:class:`~fdcore.errors.MailboxFileError` naming the file and the field. ``encode`` writes the
model back, unknown fields (``extra``) included, optional fields that are ``None`` left out so an
older reader sees the file it expects.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from types import NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.gen import make_dict_structure_fn
from cattrs.v import format_exception

from fdcore.contract.json_text import dumps_indented
from fdcore.contract.models import IncidentState, Outcome, State
from fdcore.errors import FileTooLarge, InvalidId, MailboxFileError

__all__ = [
    "EARLIEST",
    "FILE_BYTES_RANGE",
    "LATEST",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "converter",
    "decode",
    "encode",
    "encode_within",
    "format_time",
    "parse_time",
    "to_dict",
]

T = TypeVar("T")

converter = cattrs.Converter(detailed_validation=True)


#: Times an agent can compute with: adding a lease's or a record's seconds must not overflow.
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9000, 1, 1, tzinfo=timezone.utc)


def _time(value: object) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    else:
        raise TypeError(f"expected an ISO 8601 time string, got {type(value).__name__}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        parsed = parsed.astimezone(timezone.utc)
    except OverflowError:
        parsed = datetime.max.replace(tzinfo=timezone.utc)  # refused just below
    if not EARLIEST <= parsed <= LATEST:
        raise ValueError(f"time {value!r} is out of range ({EARLIEST.year} to {LATEST.year})")
    return parsed


# Agents read and write the same times again and again (a record's updated_at until it is
# rewritten, a status's attempts on every write): the last few thousand are remembered. Only
# results are (an error is raised again each time), and only of exact types, whose text and
# value depend on nothing else: equal UTC datetimes have equal fields, so equal text.
_time_of_text = functools.lru_cache(maxsize=4096)(_time)


def parse_time(value: object) -> datetime:
    """An ISO 8601 time; a time without an offset is taken as UTC."""
    return _time_of_text(value) if type(value) is str else _time(value)


def _text_of_utc(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_text_of_utc_datetime = functools.lru_cache(maxsize=4096)(_text_of_utc)


def format_time(value: datetime) -> str:
    """UTC, ISO 8601, milliseconds, ``Z``: sortable and the same on every agent."""
    utc = value.astimezone(timezone.utc)
    return (_text_of_utc_datetime if type(utc) is datetime else _text_of_utc)(utc)


converter.register_structure_hook(datetime, lambda value, _type: parse_time(value))
converter.register_unstructure_hook(datetime, format_time)


def _strict(expected: type) -> Any:
    # cattrs would coerce "3" to 3 and 1 to True; a mailbox file with the wrong type is malformed.
    def structure(value: object, _type: object) -> Any:
        if type(value) is expected:
            return value  # what JSON gives: the checks below are for everything else
        if type(value) is bool and expected is not bool:
            raise TypeError(f"expected {expected.__name__}, got a boolean")
        if expected is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, expected):
            raise TypeError(f"expected {expected.__name__}, got {type(value).__name__}")
        return value

    return structure


for _type in (int, str, bool, float):
    converter.register_structure_hook(_type, _strict(_type))


def only(expected: type, what: str, base: Callable[[Any, Any], Any]) -> Any:
    """A structure hook: ``base``, for a value of type ``expected`` only (``what`` names it);
    cattrs would split a string into characters where a list belongs."""

    def structure(value: object, type_: object) -> Any:
        if not isinstance(value, expected):
            raise TypeError(f"expected {what}, got {type(value).__name__}")
        return base(value, type_)

    return structure


def _list_factory(type_: Any) -> Any:
    return only(list, "a list", list_structure_factory(type_, converter))


def _is_list(type_: Any) -> bool:
    return get_origin(type_) is list


converter.register_structure_hook_factory(_is_list, _list_factory)


def _is_optional(type_: Any) -> bool:
    args = get_args(type_)
    return get_origin(type_) in (Union, UnionType) and len(args) == 2 and NoneType in args


def _optional_factory(type_: Any, conv: cattrs.Converter) -> Any:
    # cattrs' own hook looks the inner type's hook up on every call; this looks it up once.
    # ``conv``: the converter asking (a copy of this one, in fdcore.settings.declare).
    inner_type = next(arg for arg in get_args(type_) if arg is not NoneType)
    inner = conv.get_structure_hook(inner_type)

    def structure(value: object, _type: object) -> Any:
        return None if value is None else inner(value, inner_type)

    return structure


converter.register_structure_hook_factory(_is_optional, _optional_factory)


def _enum(value: object, cls: type[enum.Enum]) -> enum.Enum:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"{value!r} is not one of {allowed}") from None


def _enum_hook(cls: type[enum.Enum]) -> Any:
    # A dict finds a member by its value without Enum's call; anything else takes that call.
    members = {member.value: member for member in cls}

    def structure(value: object, _type: object) -> enum.Enum:
        member = members.get(value) if type(value) is str else None
        return member if member is not None else _enum(value, cls)

    return structure


# The models' enums subclass str; without these they would dispatch to the str hook above.
for _enum_type in (State, Outcome, IncidentState):
    converter.register_structure_hook(_enum_type, _enum_hook(_enum_type))


def _has_extra(cls: type) -> bool:
    return attrs.has(cls) and "extra" in attrs.fields_dict(cls)


def _structure_factory(cls: type) -> Any:
    base: Callable[[Mapping[str, Any], Any], Any] = make_dict_structure_fn(
        cls, converter, _cattrs_forbid_extra_keys=False
    )
    known = {a.name for a in attrs.fields(cls)} - {"extra"}

    def structure(value: object, _type: object) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        if value.keys() <= known:
            return base(value, cls)  # most files: no unknown field, nothing to copy
        extra = {k: v for k, v in value.items() if k not in known}
        obj = base({k: v for k, v in value.items() if k in known}, cls)
        obj.extra = extra
        return obj

    return structure


#: The types cattrs unstructures to themselves (its identity hook; the models' enums are str).
_AS_IS = frozenset({str, int, float, bool, State, Outcome, IncidentState})


def _unstructured(value: Any) -> Any:
    """``converter.unstructure(value)``, without its dispatch for the values most fields hold."""
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is datetime:
        return format_time(value)
    if kind is list:
        return [_unstructured(item) for item in value]
    model = _MODEL_UNSTRUCTURE.get(kind)
    return model(value) if model is not None else converter.unstructure(value)


#: The hook :func:`_unstructure_factory` made for each model class, found without cattrs.
_MODEL_UNSTRUCTURE: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _unstructure_factory(cls: type) -> Any:
    names = [a.name for a in attrs.fields(cls) if a.name != "extra"]

    def unstructure(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            value = getattr(obj, name)
            if value is not None:
                out[name] = value if type(value) in _AS_IS else _unstructured(value)
        for key, value in obj.extra.items():
            out.setdefault(key, value)
        return out

    _MODEL_UNSTRUCTURE[cls] = unstructure
    return unstructure


converter.register_structure_hook_factory(_has_extra, _structure_factory)
converter.register_unstructure_hook_factory(_has_extra, _unstructure_factory)

_PATH = re.compile(r"^(?P<message>.*) @ \$(?P<path>.*)$")


def _describe(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, (TypeError, ValueError)) and str(exc) and not isinstance(exc, KeyError):
        return str(exc)
    return format_exception(exc, type_)


def _first_problem(exc: BaseException) -> tuple[str | None, str]:
    """The field path (``attempts[0].agent``) and message of the first structuring error."""
    if isinstance(exc, cattrs.BaseValidationError):
        for line in cattrs.transform_error(exc, path="$", format_exception=_describe):
            match = _PATH.match(line)
            if match:
                field = match["path"].lstrip(".") or None
                message = match["message"]
                if message == "required field missing":
                    message = "missing (required)"
                return field, message
            return None, line
        inner = exc.exceptions[0] if exc.exceptions else exc
        return None, str(inner)
    return None, str(exc)


#: Bounds on what a mailbox file may hold. Files are written by other processes and by hand:
#: reading one must cost little and must not raise anything but MailboxFileError. The size
#: bound is the default of ``[agent] max_file_bytes`` (and ``FDCORE_MAX_FILE_BYTES``).
MAX_FILE_BYTES = 1 << 20
#: The range ``max_file_bytes`` may be set in: a request of thousands of tables needs more than
#: the default; beyond 64 MiB one stray file would cost every agent that much memory per read.
FILE_BYTES_RANGE = (4 << 10, 64 << 20)
MAX_DEPTH = 32


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _check_values(raw: object, path: str) -> None:
    """Depth within MAX_DEPTH, every text valid Unicode (no lone surrogates), numbers finite."""
    pending: list[tuple[object, int]] = [(raw, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise MailboxFileError(path, None, f"nested deeper than {MAX_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    pending.append((key, depth))
                pending.append((item, depth + 1))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise MailboxFileError(path, None, "holds text that is not valid Unicode") from None
        elif isinstance(value, float) and not math.isfinite(value):
            raise MailboxFileError(path, None, f"holds a number out of range ({value})")


class _OutOfRange(Exception):
    """A number too large for a float (``1e999``): the file takes the full check."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange(text)
    return value


def _plain(data: bytes) -> bool:
    """True if ``data`` cannot break what :func:`_check_values` checks but for its numbers: ASCII
    with no ``\\u`` escape (so no lone surrogate) and at most MAX_DEPTH brackets (so no deeper
    nesting). Most mailbox files are: their numbers are checked as they are parsed, and the walk
    over every value (a tenth of a simulated poll's time) is left for the others."""
    return (
        isinstance(data, bytes)
        and data.isascii()
        and b"\\u" not in data
        and b"\0" not in data
        and data.count(b"[") + data.count(b"{") <= MAX_DEPTH
    )


# json.loads with any argument builds a decoder per call; these are built once (json's own
# json.loads shares one decoder between threads the same way).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_PLAIN_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def _parse(data: bytes, plain: bool) -> Any:
    """``json.loads(data, parse_constant=..., parse_float=...)``: the same value or error."""
    if plain:  # ASCII bytes without NUL: json.detect_encoding says UTF-8
        return _PLAIN_DECODER.decode(data.decode())
    if not isinstance(data, (bytes, bytearray)):
        return json.loads(data, parse_constant=_no_constant)
    text = data.decode(json.detect_encoding(data), "surrogatepass")  # as json.loads reads bytes
    return _DECODER.decode(text)


def decode(cls: type[T], data: bytes, path: str, max_bytes: int = MAX_FILE_BYTES) -> T:
    """Parse ``data`` read from ``path`` as ``cls``; raise MailboxFileError naming the field.

    Nothing else escapes, whatever the bytes: oversized, deeply nested, invalid UTF-8, lone
    surrogates, NaN or infinite numbers, integers too long to parse, out-of-range times.
    """
    if len(data) > max_bytes:
        raise MailboxFileError(
            path, None, f"is {len(data)} bytes, over the bound of {max_bytes} bytes"
        )
    plain = _plain(data)
    try:
        try:
            raw = _parse(data, plain)
        except _OutOfRange:
            plain = False  # parsed again as any file, so it meets the error it always met
            raw = _parse(data, plain)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, int digits
        raise MailboxFileError(path, None, f"not valid JSON ({exc})") from None
    if not plain:
        _check_values(raw, path)
    if not isinstance(raw, dict):
        raise MailboxFileError(path, None, f"expected a JSON object, got {type(raw).__name__}")
    try:
        return converter.structure(raw, cls)
    except cattrs.BaseValidationError as exc:
        field, message = _first_problem(exc)
        if field is None:
            invalid = _find_invalid_id(exc)
            if invalid is not None:
                field, message = invalid.field, str(invalid)
        raise MailboxFileError(path, field, message) from None
    except (InvalidId, TypeError, ValueError, OverflowError) as exc:
        raise MailboxFileError(path, None, str(exc)) from None


def _find_invalid_id(exc: BaseException) -> InvalidId | None:
    if isinstance(exc, InvalidId):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _find_invalid_id(inner)
        if found is not None:
            return found
    return None


def to_dict(obj: Any) -> dict[str, Any]:
    result: dict[str, Any] = converter.unstructure(obj)
    return result


def encode(obj: Any) -> bytes:
    """The model as indented UTF-8 JSON, unknown fields included."""
    return (dumps_indented(to_dict(obj)) + "\n").encode()


def encode_within(obj: Any, path: str, max_bytes: int) -> bytes:
    """:func:`encode`, for a write to ``path``: FileTooLarge if the bytes are over ``max_bytes``,
    the bound :func:`decode` reads it with. Every mailbox write encodes here, so no writer
    leaves a file its readers would refuse."""
    data = encode(obj)
    if len(data) > max_bytes:
        raise FileTooLarge(path, len(data), max_bytes)
    return data
