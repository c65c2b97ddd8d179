"""Settings declared once: attrs classes whose fields carry their default, their checks and a
line of help, as APScheduler 4 declares its settings.

:func:`setting` declares a field. :func:`structure` reads a parsed file (a TOML document) into
the classes with the project's strict converter (:mod:`fdcore.contract.codec`: no ``"3"`` taken
for ``3``), and turns the first mistake into one line naming the file, the table and the key:
an unknown key gets "did you mean" among its table's keys, or the table it belongs in. The
same declaration gives the JSON Schema editors check a file with (:func:`json_schema`) and the
reference tables of docs/agents.md (:func:`reference`).
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterator, Mapping
from datetime import time
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory, mapping_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ForbiddenExtraKeysError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override

from fdcore.contract.codec import converter as _contract_converter
from fdcore.contract.codec import only
from fdcore.durations import format_duration, parse_duration
from fdcore.errors import ConfigError, DurationError
from fdcore.settings.checks import Check, Duration, Invalid, Seconds
from fdcore.webhook import NOT_A_VARIABLE, is_variable_name

__all__ = [
    "FLAG",
    "check_of",
    "checks_of",
    "default_of",
    "effective",
    "help_of",
    "hidden",
    "json_schema",
    "reference",
    "setting",
    "structure",
    "tables",
]

T = TypeVar("T")

_HELP = "fdcore.help"  # one line for the reference table and the schema's description
_DURATION = "fdcore.duration"  # shown as a duration text ("15m"), held as seconds
_SECONDS = "fdcore.seconds"  # shown as a number of seconds; takes a duration text too
_REST = "fdcore.rest"  # holds the table's keys the class does not declare (a plugin's options)
_HEADER = "fdcore.header"  # the table's own name ([notify.routes.<name>]), not a key
_EXPECTS = "fdcore.expects"  # what the value should be, in words, if not said by its type
_BOUNDS = "fdcore.bounds"  # JSON Schema keywords of a check (minimum, maximum, enum...)
_SHOWN = "fdcore.shown"  # the reference's words for a default a factory gives
_CHECKS = "fdcore.checks"  # the value checks among its validators
FLAG = "fdcore.flag"  # how a command line writes the key (--agents), if it does


def _fields(cls: type) -> Any:
    """The fields of ``cls`` with their types resolved (the modules use postponed annotations)."""
    return attrs.fields(attrs.resolve_types(cls))


def _fields_dict(cls: type) -> dict[str, attrs.Attribute[Any]]:
    return {field.name: field for field in _fields(cls)}


def setting(
    default: Any = attrs.NOTHING,
    *,
    help: str,
    check: Any = None,
    factory: Any = None,
    duration: bool = False,
    seconds: bool = False,
    rest: bool = False,
    header: bool = False,
    expects: str | None = None,
    flag: str | None = None,
    shown: str | None = None,
) -> Any:
    """A declared field: its default (or ``factory``), its checks (:mod:`fdcore.settings.checks`,
    or an attrs validator of a rule between keys) and its help.

    A duration key (checked by :class:`~fdcore.settings.checks.Duration`, or ``duration``: shown
    as text, ``"15m"``; checked by :class:`~fdcore.settings.checks.Seconds`, or ``seconds``:
    shown as a number of seconds) takes either form: ``30``, ``"30s"``, ``"1h30m"``. ``flag``:
    how a command line writes the key (``--agents``), for a declaration read from flags;
    ``shown``: the reference's words for a default a ``factory`` gives."""
    checks = _listed(check)
    duration = duration or any(isinstance(c, Duration) for c in checks)
    seconds = seconds or any(isinstance(c, Seconds) for c in checks)
    bounds: dict[str, Any] = {}
    for item in checks:
        bounds.update(getattr(item, "bounds", {}))
    metadata = {
        _HELP: help,
        _DURATION: duration,
        _SECONDS: seconds and not duration,
        _REST: rest,
        _HEADER: header,
        _EXPECTS: expects,
        _BOUNDS: bounds,
        FLAG: flag,
        _SHOWN: shown,
        _CHECKS: tuple(c for c in checks if isinstance(c, Check)),
    }
    if factory is not None:
        return attrs.field(factory=factory, validator=checks or None, metadata=metadata)
    return attrs.field(default=default, validator=checks or None, metadata=metadata)


def _listed(check: Any) -> list[Any]:
    if check is None:
        return []
    return list(check) if isinstance(check, (list, tuple)) else [check]


def help_of(field: attrs.Attribute[Any]) -> str:
    """A declared field's line of help."""
    return str(field.metadata.get(_HELP, ""))


def checks_of(field: attrs.Attribute[Any]) -> tuple[Check, ...]:
    """A declared field's value checks (:mod:`fdcore.settings.checks`; not its rules between
    keys), for a reader of another kind (a flag) to apply the same."""
    return tuple(field.metadata.get(_CHECKS, ()))


def check_of(cls: type, name: str) -> Check:
    """The one value check of the declared field ``cls.name``: for another reader of the same
    value (a flag, a scenario, a method's parameter) to apply it, not a copy of it."""
    [check] = checks_of(_fields_dict(cls)[name])
    return check


def default_of(cls: type, name: str) -> Any:
    """The declared default of ``cls.name``: for a class that repeats a field, not its value."""
    field = _fields_dict(cls)[name]
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return attrs.Factory(field.default.factory)  # type: ignore[union-attr]
    return field.default


# -- reading: the project's strict converter, with tables ---------------------------------------

converter = _contract_converter.copy()


def _is_settings(cls: Any) -> bool:
    return attrs.has(cls) and any(_HELP in a.metadata for a in _fields(cls))


def _is_duration(field: attrs.Attribute[Any]) -> bool:
    """Whether ``field`` is a duration key: a number of seconds or a duration text."""
    return bool(field.metadata.get(_DURATION) or field.metadata.get(_SECONDS))


def _duration_hook(value: object, _type: object) -> float:
    """A duration key's value in seconds: a number as it is, a text as a duration."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise TypeError(f"expected a duration, got {value!r}")
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None


def _table_hook(cls: type) -> Any:
    fields = _fields(cls)
    rest = next((a.name for a in fields if a.metadata.get(_REST)), None)
    header = next((a.name for a in fields if a.metadata.get(_HEADER)), None)
    keys = {a.name for a in fields if a.name not in (rest, header)}
    hooks = {a.name: override(struct_hook=_duration_hook) for a in fields if _is_duration(a)}
    base: Any = make_dict_structure_fn(
        cls,
        converter,
        _cattrs_forbid_extra_keys=rest is None,
        **hooks,  # type: ignore[arg-type]
    )

    def structure(value: object, _type: object) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected a table, got {value!r}")
        given = dict(value)  # an unknown key is refused, unless the table keeps the rest
        if rest is not None:
            given = {k: v for k, v in value.items() if k in keys}
            given[rest] = {k: v for k, v in value.items() if k not in keys}
            _check_variable_names(rest, given[rest])
        if header is not None:
            given[header] = ""  # named by the table of tables that holds it
        return base(given, cls)

    return structure


converter.register_structure_hook_factory(_is_settings, _table_hook)


def _check_variable_names(rest: str, options: Mapping[str, Any]) -> None:
    """A plugin's ``*_env`` option names the variable holding a secret: anything else there is
    refused without being repeated (a webhook URL or a key pasted in)."""
    for key, value in options.items():
        if key.endswith("_env") and isinstance(value, str) and not is_variable_name(value):
            raise Invalid((rest, key), NOT_A_VARIABLE)


#: Option keys whose value may be a secret: never shown, never repeated in an error.
_SECRET_KEY = re.compile(r"secret|password|passwd|token|key|credential|connection|sig", re.I)


def hidden(key: str, value: Any) -> Any:
    """``value`` as it may be shown: ``<hidden>`` for what may be a secret (a secret-shaped key,
    a URL with a user or a query, a ``*_env`` option that names no variable)."""
    if not isinstance(value, str):
        return value
    if key.endswith("_env"):
        return value if is_variable_name(value) else "<hidden>"
    looks_secret = _SECRET_KEY.search(key) or re.search(r"://[^/]*@|[?&]", value)
    return "<hidden>" if looks_secret else value


def _tuple_factory(type_: Any) -> Any:
    items: Any = list[get_args(type_)[0]]  # type: ignore[misc]
    base = list_structure_factory(items, converter)  # this converter's tables, not the codec's
    return only(list, "a list", lambda value, _type: tuple(base(value, items)))


def _is_tuple(type_: Any) -> bool:
    """``tuple[X, ...]`` (a list in the file); a pair, ``tuple[X, Y]``, is the codec's."""
    args = get_args(type_)
    return get_origin(type_) is tuple and len(args) == 2 and args[1] is Ellipsis


def _is_dict(type_: Any) -> bool:
    return get_origin(type_) is dict


converter.register_structure_hook_factory(_is_tuple, _tuple_factory)


def _dict_factory(type_: Any) -> Any:
    return only(dict, "a table", mapping_structure_factory(type_, converter))


converter.register_structure_hook_factory(_is_dict, _dict_factory)


def _time_of_day(value: object, _type: object) -> time:
    try:
        return time.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"expected a time, got {value!r}") from None


converter.register_structure_hook(time, _time_of_day)


def structure(cls: type[T], data: Mapping[str, Any], source: str) -> T:
    """``data`` (a parsed file) as ``cls``; a one-line ConfigError naming ``source``, the table
    and the key of the first mistake."""
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, Invalid, TypeError, ValueError) as exc:
        path, problem = _first_problem(exc)
        if isinstance(problem, ConfigError) and not isinstance(problem, Invalid):
            raise problem from None  # names its own source: a default's variable
        raise _error(cls, data, source, path, problem) from None


def _first_problem(exc: BaseException) -> tuple[list[Any], BaseException]:
    """The path (field names, indexes, keys) of the first mistake and its exception; an unknown
    key first, as it often explains the rest."""
    path: list[Any] = []
    while isinstance(exc, cattrs.BaseValidationError) and exc.exceptions:
        inner = exc.exceptions
        exc = next((e for e in inner if isinstance(e, ForbiddenExtraKeysError)), inner[0])
        for note in getattr(exc, "__notes__", ()):
            if isinstance(note, AttributeValidationNote):
                path.append(note.name)
            elif isinstance(note, IterableValidationNote):
                path.append(note.index)
    if isinstance(exc, Invalid):
        path.extend(exc.path)
    return path, exc


# -- the tables of a declaration, and where a path is in the file --------------------------------


def _plain(type_: Any) -> Any:
    """``X`` of ``X | None``."""
    if get_origin(type_) in (Union, types.UnionType):
        args = [a for a in get_args(type_) if a is not type(None)]
        return args[0] if len(args) == 1 else type_
    return type_


def _inline(cls: Any) -> bool:
    return bool(getattr(cls, "inline", False))


def _container(type_: Any) -> tuple[str | None, Any]:
    """("list" or "dict", the item type) of a container of tables; (None, type) otherwise."""
    type_ = _plain(type_)
    origin, args = get_origin(type_), get_args(type_)
    if origin in (list, tuple) and args and _is_settings(args[0]):
        return "list", args[0]
    if origin is dict and len(args) == 2 and _is_settings(args[1]):
        return "dict", args[1]
    return None, type_


def _is_section(type_: Any) -> bool:
    kind, item = _container(type_)
    return kind is not None or (_is_settings(item) and not _inline(item))


@attrs.define
class _Place:
    """Where a path lands in the file: its table header and key, and the field there."""

    sections: list[str] = attrs.field(factory=list)
    number: int | None = None
    keys: list[str] = attrs.field(factory=list)
    field: attrs.Attribute[Any] | None = None
    type: Any = None  # the declared type of the value there
    value: Any = None

    def header(self, numbered: bool = True) -> str:
        if not self.sections:
            return ""
        dotted = ".".join(self.sections)
        if self.number is None:
            return f"[{dotted}]"
        return f"[[{dotted}]] #{self.number}" if numbered else f"[[{dotted}]]"

    def where(self) -> str | None:
        return " ".join(part for part in (self.header(), ".".join(self.keys)) if part) or None


def _locate(cls: type, data: Any, path: list[Any]) -> _Place:
    place = _Place(value=data)
    current: Any = cls
    for element in path:
        kind, item = _container(current)
        if kind == "list" and isinstance(element, int):
            place.number, current = element + 1, item
            place.field, place.type = None, item
        elif kind == "dict":
            place.sections.append(str(element))
            place.field, place.type, current = None, item, item
        elif _is_settings(_plain(current)) and isinstance(element, str):
            current = _enter(place, _plain(current), element)
        elif current is None and isinstance(element, str):
            place.keys.append(element)  # a key of a table's rest: a value of its mapping
            place.field, place.type = None, (get_args(place.type) or (str, str))[-1]
        else:
            break  # an item of a list of values: the list is the key
        place.value = _step(place.value, element)
    return place


def _enter(place: _Place, cls: type, name: str) -> Any:
    """Step into field ``name`` of ``cls``: a table of its own, or a key of the current one."""
    field = _fields_dict(cls).get(name)
    if field is None:
        return None
    place.field, place.type = field, field.type
    if field.metadata.get(_REST):
        return None  # the rest of a table's keys: its own keys follow
    if _is_section(field.type):
        place.sections.append(name)
    else:
        place.keys.append(field.metadata.get(FLAG) or name)
    return field.type


def _step(value: Any, element: Any) -> Any:
    if isinstance(value, Mapping):
        return value.get(element, value)
    if isinstance(value, list) and isinstance(element, int) and element < len(value):
        return value[element]
    return value


def _error(
    cls: type, data: Mapping[str, Any], source: str, path: list[Any], problem: BaseException
) -> ConfigError:
    place = _locate(cls, data, path)
    if isinstance(problem, ForbiddenExtraKeysError):
        return _unknown_key(cls, source, place, problem)
    if isinstance(problem, KeyError):
        return ConfigError(source, place.where(), "missing (required)")
    if isinstance(problem, TypeError):
        if place.field is not None and place.sections and not place.keys:
            place.keys.append(place.sections.pop())  # a table's key holds something else
            place.number = None
        expected = f"expected {_expects(place)}, got {_short(place)}"
        return ConfigError(source, place.where(), expected)
    message = problem.message if isinstance(problem, ConfigError) else str(problem)
    return ConfigError(source, place.where(), message)


def _short(place: _Place) -> str:
    key = place.keys[-1] if place.keys else ""
    if hidden(key, place.value) != place.value or _SECRET_KEY.search(key) or key.endswith("_env"):
        return "a value not shown (it may be a secret)"
    text = repr(place.value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expects(place: _Place) -> str:
    metadata = place.field.metadata if place.field is not None else {}
    if metadata.get(_EXPECTS):
        return str(metadata[_EXPECTS])
    if place.field is not None and _is_duration(place.field):
        default = place.field.default
        example = format_duration(default) if isinstance(default, float) else "1m"
        return f'a number of seconds or a duration such as "{example}"'
    return "a table" if place.type is None else _words(place.type)


_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _words(type_: Any) -> str:
    type_ = _plain(type_)
    if type_ in _WORDS:
        return _WORDS[type_]
    if _container(type_)[0] == "list":
        return "an array of tables"
    if get_origin(type_) in (list, tuple):
        return "a list of strings"
    return "a table"


def _unknown_key(
    cls: type, source: str, place: _Place, problem: ForbiddenExtraKeysError
) -> ConfigError:
    table = place.value if isinstance(place.value, Mapping) else {}
    key = next((k for k in table if k in problem.extra_fields), sorted(problem.extra_fields)[0])
    known = [a.name for a in _fields(problem.cl)]
    if not place.sections and not place.keys:  # the top of the file: tables
        known = [f"[{name}]" for name in known]
        if isinstance(table.get(key), Mapping):
            return ConfigError.unknown_key(source, f"[{key}]", f"[{key}]", known, "unknown table")
    where = attrs.evolve(place, keys=[*place.keys, key]).where()
    here = place.header(numbered=False)
    owners = [name for name, keys in tables(cls).items() if key in keys and name != here]
    if owners and not place.keys:
        return ConfigError(source, where, f"unknown key; {key!r} belongs in {' or '.join(owners)}")
    return ConfigError.unknown_key(source, where or key, key, known)


def tables(cls: type, header: str = "") -> dict[str, list[str]]:
    """Each table of the declaration ``cls`` (its header, as the file writes it) with its keys."""
    found: dict[str, list[str]] = {}
    own: list[str] = []
    for field in _fields(cls):
        if field.metadata.get(_REST) or field.metadata.get(_HEADER):
            continue
        kind, item = _container(field.type)
        dotted = f"{header}.{field.name}" if header else field.name
        if kind == "list":
            found.update(tables(item, f"[[{dotted}]]"))
        elif kind == "dict":
            found.update(tables(item, f"{dotted}.<name>"))
        elif _is_section(field.type):
            found.update(tables(_plain(field.type), dotted))
        else:
            own.append(field.name)
    if header:
        name = header if header.startswith("[") else f"[{header}]"
        found = {name: own, **found}
    return found


# -- describing a declaration: the JSON Schema and the reference tables -------------------------

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
#: A duration text as :func:`~fdcore.durations.parse_duration` reads it.
DURATION_PATTERN = r"^\s*((\d+(\.\d+)?|\.\d+)\s*[dhms]\s*)+$"


def _field_schema(field: attrs.Attribute[Any]) -> dict[str, Any]:
    type_ = _plain(field.type)
    kind, item = _container(type_)
    schema: dict[str, Any]
    bounds = dict(field.metadata.get(_BOUNDS, {}))
    if _is_duration(field):
        text = {"type": "string", "pattern": DURATION_PATTERN}
        number = {"type": "number", **bounds}
        forms = [text, number] if field.metadata.get(_DURATION) else [number, text]
        schema = {"anyOf": forms}
        bounds = {}
    elif kind == "list":
        schema = {"type": "array", "items": _class_schema(item)}
    elif kind == "dict":
        schema = {"type": "object", "additionalProperties": _class_schema(item)}
    elif _is_settings(type_):
        schema = _class_schema(type_)
    elif get_origin(type_) in (list, tuple):
        schema = {"type": "array", "items": {"type": "string"}}
    elif get_origin(type_) is dict:
        schema = {"type": "object", "additionalProperties": {"type": "string"}}
    else:
        schema = {"type": _JSON_TYPES.get(type_, "string")}
    if "enum" in bounds and schema.get("type") == "array":
        schema["items"] = {"type": "string", "enum": bounds.pop("enum")}
    schema.update(bounds)
    schema["description"] = field.metadata.get(_HELP, "")
    default = _json_default(field)
    if default is not None:
        schema["default"] = default
    return schema


def _json_default(field: attrs.Attribute[Any]) -> Any:
    default = field.default
    if default is attrs.NOTHING or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return None
    if field.metadata.get(_DURATION) and isinstance(default, (int, float)):
        return format_duration(default)
    if isinstance(default, tuple):
        return list(default)
    return default if isinstance(default, (str, int, float, bool)) else None


def _class_schema(cls: type) -> dict[str, Any]:
    fields = _fields(cls)
    rest = next((a for a in fields if a.metadata.get(_REST)), None)
    properties = {
        a.name: _field_schema(a)
        for a in fields
        if not (a.metadata.get(_REST) or a.metadata.get(_HEADER))
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if cls.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    required = [a.name for a in fields if a.default is attrs.NOTHING and a.name in properties]
    if required:
        schema["required"] = required
    extra = getattr(cls, "schema_extra", None)
    if rest is None:
        schema["additionalProperties"] = False
    elif callable(extra):
        schema.update(extra())
    else:
        schema["additionalProperties"] = _field_schema(rest).get("additionalProperties", True)
    return schema


def json_schema(cls: type, title: str) -> dict[str, Any]:
    """The JSON Schema of files declared by ``cls``: draft 7, in the keywords draft 4 has too
    (taplo, the TOML language server of editors, reads draft 4)."""
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": title,
        **_class_schema(cls),
    }


def reference(cls: type) -> Iterator[str]:
    """Markdown: one table per table of the declaration, each key with its type, default and
    help (a table that keeps other keys, a plugin's options, says so last)."""
    for header, fields in _sections(cls, ""):
        yield f"`{header}`" if header else "The file"
        yield ""
        yield "| key | type | default | meaning |"
        yield "|---|---|---|---|"
        for field in fields:
            yield _row(field)
        yield ""


def _row(field: attrs.Attribute[Any]) -> str:
    help_text = str(field.metadata.get(_HELP, "")).replace("|", "\\|")
    if field.metadata.get(_REST):
        return f"| any other key | string | | {help_text} |"
    default = _json_default(field)
    shown = f"`{_toml(default)}`"
    if field.metadata.get(_SHOWN):
        shown = str(field.metadata[_SHOWN]).replace("|", "\\|")
    elif field.default is attrs.NOTHING:
        shown = "required"
    elif default is None:
        shown = "none"
    kind = "duration" if _is_duration(field) else _json_type(field)
    return f"| `{field.name}` | {kind} | {shown} | {help_text} |"


def _json_type(field: attrs.Attribute[Any]) -> str:
    schema = _field_schema(field)
    kind = schema.get("type", "")
    return {"array": "list of strings", "object": "inline table"}.get(str(kind), str(kind))


def _toml(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return f"{value:g}" if isinstance(value, float) else str(value)


def _sections(cls: type, header: str) -> Iterator[tuple[str, list[attrs.Attribute[Any]]]]:
    own: list[attrs.Attribute[Any]] = []
    nested: list[tuple[str, type]] = []
    for field in _fields(cls):
        if field.metadata.get(_HEADER):
            continue
        kind, item = _container(field.type)
        dotted = f"{header.strip('[]')}.{field.name}" if header else field.name
        if field.metadata.get(_REST):
            kind, item = None, None
        if kind == "list":
            nested.append((f"[[{dotted}]]", item))
        elif kind == "dict":
            nested.append((f"[{dotted}.<name>]", item))
        elif _is_section(field.type):
            nested.append((f"[{dotted}]", _plain(field.type)))
        else:
            own.append(field)
    if own:
        yield header, sorted(own, key=lambda field: bool(field.metadata.get(_REST)))
    for name, item in nested:
        yield from _sections(item, name)


def effective(instance: Any) -> dict[str, Any]:
    """A declared instance as the file would say it, every default filled in: durations as
    text, a table's rest keys back beside its own, tables of tables by name."""
    out: dict[str, Any] = {}
    for field in _fields(type(instance)):
        value = getattr(instance, field.name)
        if field.metadata.get(_HEADER):
            continue
        if field.metadata.get(_REST):
            out.update(value)
        elif value is None:
            continue
        else:
            out[field.name] = _effective_value(field, value)
    return out


def _effective_value(field: attrs.Attribute[Any], value: Any) -> Any:
    if field.metadata.get(_DURATION):
        return format_duration(value)
    if attrs.has(type(value)):
        return effective(value)
    if isinstance(value, Mapping):
        return {k: _effective_value(field, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [effective(v) if attrs.has(type(v)) else v for v in value]
    if isinstance(value, time):
        return value.isoformat(timespec="minutes")
    return value
