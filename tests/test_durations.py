"""fdcore.durations: the one duration syntax of agent.toml."""

from __future__ import annotations

import pytest

from fdcore.durations import format_duration, parse_duration
from fdcore.errors import DurationError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15m", 900),
        ("900s", 900),
        ("2s", 2),
        ("1h30m", 5400),
        ("1h 30m", 5400),
        (" 1d ", 86400),
        ("1d2h3m4s", 93784),
        ("0.5s", 0.5),
        ("1.5h", 5400),
        ("0s", 0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("15x", "duration '15x': unknown unit 'x' (use s, m, h, d)"),
        ("15M", "duration '15M': unknown unit 'M' (use s, m, h, d)"),
        ("15 min", "duration '15 min': unknown unit 'min' (use s, m, h, d)"),
        ("15", "duration '15': missing unit after 15 (use s, m, h, d)"),
        ("1h30", "duration '1h30': missing unit after 30 (use s, m, h, d)"),
        ("", "duration '': is empty (write a number and a unit, like \"15m\")"),
        ("-5s", "duration '-5s': expected a number at '-5s'"),
        ("1h, 5m", "duration '1h, 5m': expected a number at ', 5m'"),
        ("1h1h", "duration '1h1h': unit 'h' given twice"),
        ("30m1h", "duration '30m1h': write the units from largest to smallest (d, h, m, s)"),
        (15, 'duration 15: must be a text like "15m"'),
    ],
)
def test_parse_duration_refuses(text: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(21600, "6h"), (5400, "1h30m"), (900, "15m"), (90.25, "1m30.25s"), (0, "0s"), (86401, "1d1s")],
)
def test_format_duration_round_trips(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


def test_format_duration_refuses_negative() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        format_duration(-1)
