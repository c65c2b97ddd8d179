"""The codec's text is json.dumps' text, byte for byte: etags, digests and other tools read it.

``encode`` writes through :mod:`fdcore.contract.json_text` and a ``to_dict`` that skips cattrs'
dispatch where it can; both are held here to what they replace: ``json.dumps(value, indent=2,
ensure_ascii=False)`` and ``converter.unstructure`` field by field.
"""

from __future__ import annotations

import enum
import json
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_contracts import FIXTURES, KINDS

from fdcore.contract import json_text
from fdcore.contract.codec import converter, decode, encode, format_time, parse_time, to_dict
from fdcore.contract.json_text import DEEPEST, dumps_indented
from fdcore.contract.models import IncidentState, Outcome, Request, State
from fdcore.errors import MailboxFileError


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def same_text_or_error(value: Any) -> None:
    try:
        expected: object = dumps(value)
    except Exception as exc:  # the error itself is what is compared
        expected = (type(exc), str(exc))
    try:
        got: object = dumps_indented(value)
    except Exception as exc:  # the error itself is what is compared
        got = (type(exc), str(exc))
    assert got == expected


class Level(enum.IntEnum):
    LOW = 1


class Tag(str, enum.Enum):
    A = "a\n\u00e9"


class Weird(float):
    def __repr__(self) -> str:
        return "weird"


# Text of every kind but lone surrogates (a mailbox file cannot hold them): control
# characters, quotes, backslashes, astral characters.
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e16, -0.0, 0.0, 1.5e-7, 1e-300, 5e-324, 1.7976931348623157e308, 0.1])
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_json_value_gets_json_dumps_text(value: Any) -> None:
    assert dumps_indented(value) == dumps(value)


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        scalars | st.sampled_from([State.RUNNING, Level.LOW, Tag.A]),
        lambda inner: (
            st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(
                st.none() | st.booleans() | st.integers() | st.floats() | texts, inner, max_size=3
            )
            | st.lists(inner, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_what_json_dumps_takes_beyond_plain_values_gets_its_text(value: Any) -> None:
    """Tuples, enums, keys that are numbers or null, NaN and infinities."""
    same_text_or_error(value)


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"a": {}, "b": [], "c": [[]], "d": [{}]},
        [math.nan, math.inf, -math.inf],
        {"x": math.nan},
        {math.inf: 1, None: 2, True: 3, 1.5: 4, 7: 5},
        {(1, 2): 1},  # a key json refuses: its TypeError
        {"x": object()},  # a value json refuses
        {"x": Weird(1.0)},
        {"x": {1, 2}},
        [b"bytes"],
        "a bare string",
        {"deep": json.loads("[" * (DEEPEST + 20) + "]" * (DEEPEST + 20))},
        {"a": "\ud800 a lone surrogate", "\udfff": 1},  # json.dumps keeps them; encode() refuses
        {"ctl": "".join(map(chr, range(32))) + '"\\/\u2028\u2029\x7f'},
    ],
)
def test_edge_values_get_json_dumps_text_or_error(value: Any) -> None:
    same_text_or_error(value)


def test_a_cycle_is_json_dumps_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    same_text_or_error({"loop": loop})
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(loop)


def test_nesting_past_the_interpreter_is_json_dumps_error() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        dumps_indented(deep)


# -- models ------------------------------------------------------------------------------------

#: Every file kind (a fence, fences/<table>.json, is a Lease), from test_contracts. Where a
#: kind keeps free text, varied by the property below:
TEXT = {"status": "message", "run": "output", "cancel": "reason", "agent": "host"}
NESTED = {"status": ("attempts", 0), "agent": ("schedules", 0), "incidents": ("open", 0)}


def what_to_dict_gave(value: Any) -> Any:
    """The former to_dict: each field that is not None through cattrs' dispatch, then extra."""
    if attrs.has(type(value)):
        out = {
            a.name: what_to_dict_gave(getattr(value, a.name))
            for a in attrs.fields(type(value))
            if a.name != "extra" and getattr(value, a.name) is not None
        }
        for key, item in value.extra.items():
            out.setdefault(key, item)
        return out
    if type(value) is list:
        return [what_to_dict_gave(item) for item in value]
    return converter.unstructure(value)


def assert_encoded_as_before(model: Any) -> None:
    before = what_to_dict_gave(model)
    # repr tells 1 from 1.0 and True, and an enum from its text: == does not
    assert repr(to_dict(model)) == repr(before)
    assert encode(model) == (dumps(before) + "\n").encode()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_fixture_encodes_as_before(name: str) -> None:
    model = decode(KINDS[name], (FIXTURES / f"{name}.json").read_bytes(), name)
    assert_encoded_as_before(model)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(sorted(KINDS)),
    extra=st.dictionaries(texts.map(lambda key: "x_" + key), json_values, max_size=3),
    nested_extra=st.dictionaries(texts.map(lambda key: "x_" + key), json_values, max_size=2),
    text=texts,
    number=st.floats(min_value=1e-9, max_value=3e8) | st.integers(1, 10**8),
    big=st.integers(min_value=1, max_value=10**30),
)
def test_models_with_any_values_encode_as_before(
    name: str,
    extra: dict[str, Any],
    nested_extra: dict[str, Any],
    text: str,
    number: float,
    big: int,
) -> None:
    raw = json.loads((FIXTURES / f"{name}.json").read_bytes())
    raw.update(extra)
    if name in TEXT:
        raw[TEXT[name]] = text
    if name in NESTED:
        field, index = NESTED[name]
        raw[field][index].update(nested_extra)
    if name == "agent":
        raw.update(stale_after=number, clock_skew=-number, pid=big)
    if name == "status":
        raw.update(attempt=big, state=State.FAILED.value)
        raw["attempts"][-1].update(outcome=Outcome.STOPPED.value, number=big)
    if name == "incidents":
        raw["open"][0].update(count=big, state=IncidentState.OPEN.value)
    model = decode(KINDS[name], json.dumps(raw).encode(), name)
    assert_encoded_as_before(model)
    assert decode(KINDS[name], encode(model), name) == model


@pytest.mark.parametrize("name", sorted(KINDS))
def test_models_are_written_without_json_dumps(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """json.dumps is for values a model does not hold: a model written through it is as right,
    and as slow as before (a model's enums once took that way)."""
    model = decode(KINDS[name], (FIXTURES / f"{name}.json").read_bytes(), name)
    expected = encode(model)

    def refuse(*_args: object, **_kwargs: object) -> str:
        raise AssertionError("json.dumps was called")

    monkeypatch.setattr(json_text.json, "dumps", refuse)
    assert encode(model) == expected


# -- times, remembered -------------------------------------------------------------------------

zones = st.integers(-23 * 60, 23 * 60).map(lambda minutes: timezone(timedelta(minutes=minutes)))


@settings(max_examples=200, deadline=None)
@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(8999, 1, 1), timezones=zones)
)
def test_a_time_is_written_and_read_the_same_remembered_or_not(value: datetime) -> None:
    text = value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    expected = text.replace("+00:00", "Z")
    assert format_time(value) == format_time(value) == expected
    parsed = parse_time(expected)
    assert (
        parse_time(expected)
        == parsed
        == value.replace(microsecond=value.microsecond // 1000 * 1000)
    )
    assert parsed.tzinfo is timezone.utc


@pytest.mark.parametrize("time", ["9999-12-31T23:59:59Z", "2027-13-01T00:00:00Z", "yesterday"])
def test_a_bad_time_is_refused_on_every_read(time: str) -> None:
    """Times read are remembered, their errors are not: the second read fails as the first."""
    data = json.dumps({"id": "r1", "entities": ["t"], "created_at": time}).encode()
    for _ in range(2):
        with pytest.raises(MailboxFileError, match="created_at"):
            decode(Request, data, "requests/r1.json")
