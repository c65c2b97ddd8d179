"""The mailbox's JSON text: exactly ``json.dumps(value, indent=2, ensure_ascii=False)``, faster.

With ``indent`` the standard library leaves its C encoder for a pure-Python generator that
yields each token; every mailbox write paid for that. :func:`dumps_indented` builds the same
text from the C string escaper, ``int.__repr__`` and ``float.__repr__`` (what ``json`` uses), one
container at a time. It knows only the values a model unstructures to (``dict`` with ``str``
keys, ``list``, ``tuple``, ``str``, ``int``, finite ``float``, ``bool``, ``None``, and ``str`` or
``int`` subclasses such as the models' enums, which json writes as their base type); anything
else (another key type, NaN or infinity, a float subclass, a cycle, nesting past
:data:`DEEPEST`) is handed to ``json.dumps`` itself, so the text, or the error, is always the
one it gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

__all__ = ["dumps_indented"]

#: Nesting past this goes to json.dumps, which reports a cycle as its ValueError. Mailbox files
#: are read to 32 levels (codec.MAX_DEPTH), so only a value built in memory gets that far.
DEEPEST = 100


class _NotPlain(Exception):
    """A value this module does not write: json.dumps writes the whole text instead."""


def _float(value: float) -> str:
    text = float.__repr__(value)
    if text in ("nan", "inf", "-inf"):
        raise _NotPlain  # json's NaN and Infinity, or its error: its own code decides
    return text


_NULL_TRUE_FALSE = {None: "null", True: "true", False: "false"}

#: The text of a scalar, by exact type (a bool is no int here: ``type(True) is bool``).
_SCALAR: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    int: int.__repr__,
    float: _float,
    bool: _NULL_TRUE_FALSE.__getitem__,
    type(None): _NULL_TRUE_FALSE.__getitem__,
}

#: ``"\n"`` and the indent of each level, built once.
_NEWLINE = ["\n" + "  " * level for level in range(DEEPEST + 2)]


def _subclass(value: Any) -> str:
    # A model's enums are str subclasses. json writes any str with encode_basestring and any
    # int with int.__repr__, whatever the subclass changes: so its type joins _SCALAR.
    text: Callable[[Any], str]
    if isinstance(value, str):
        text = encode_basestring
    elif isinstance(value, int):
        text = int.__repr__
    else:
        raise _NotPlain
    _SCALAR[type(value)] = text
    return text(value)


#: The text of a key and its separator: field names, mostly, written again on every write.
_KEYS: dict[str, str] = {}


def _key(key: str) -> str:
    text = encode_basestring(key) + ": "
    if len(_KEYS) < 1000:
        _KEYS[key] = text
    return text


def _text(value: Any, level: int) -> str:
    scalar = _SCALAR.get(type(value))
    if scalar is not None:
        return scalar(value)
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return _subclass(value)
    if level >= DEEPEST:
        raise _NotPlain
    if not value:
        return "{}" if kind is dict else "[]"
    inner = _NEWLINE[level + 1]
    separator = "," + inner
    level += 1
    scalar_of = _SCALAR.get
    # A scalar's text is looked up here, not in a call of _text: most items are scalars.
    if kind is dict:
        # encode_basestring refuses a key that is no str (TypeError): json.dumps decides then.
        items = separator.join(
            [
                (_KEYS.get(key) or _key(key))
                + (scalar(item) if (scalar := scalar_of(type(item))) else _text(item, level))
                for key, item in value.items()
            ]
        )
        return "{" + inner + items + _NEWLINE[level - 1] + "}"
    items = separator.join(
        [
            (scalar(item) if (scalar := scalar_of(type(item))) else _text(item, level))
            for item in value
        ]
    )
    return "[" + inner + items + _NEWLINE[level - 1] + "]"


def dumps_indented(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``: the same text, or the same error."""
    try:
        return _text(value, 0)
    except (_NotPlain, TypeError):
        return json.dumps(value, indent=2, ensure_ascii=False)
