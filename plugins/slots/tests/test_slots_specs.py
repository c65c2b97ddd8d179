"""Parsing: canonical descriptions (schedule fingerprints), bad input, plugin registration."""

from __future__ import annotations

from typing import Any

import pytest
from fdcore_slots import Cron, Daily, Every, Weekly

import fdcore.plugins.manager
from fdcore.abc import SlotFunction, Timetable

BERLIN = {"timezone": "Europe/Berlin"}
FUNCTIONS: dict[str, SlotFunction] = {f.name: f for f in (Every(), Cron(), Daily(), Weekly())}


def describe(key: str, spec: str, options: dict[str, Any] | None = None) -> str:
    return FUNCTIONS[key].parse(spec, options or {}).describe()


@pytest.mark.parametrize(
    ("key", "specs", "text"),
    [
        ("every", [("15m", {}), ("900s", {}), ("0.25h", {}), (" 14m 60s ", {})], "every 900s"),
        (
            "cron",
            [
                ("0 2 * * 1", {}),
                ("0 02 * * mon", {}),
                ("0  2 * * MON", {"timezone": "UTC"}),
                ("0 2 * * 1,1", {}),
                # a range from a value to itself is that value, as in cron
                ("0 2-2 * * mon-1", {}),
            ],
            "cron 0 2 * * 1 UTC",
        ),
        ("cron", [("0 2 * * 0", {}), ("0 2 * * 7", {}), ("0 2 * * sun", {})], "cron 0 2 * * 0 UTC"),
        (
            "cron",
            [("0 0 * * *", {}), ("@daily", {}), ("@MIDNIGHT", {}), ("0 0 1,15 * 0-6", {})],
            "cron 0 0 * * * UTC",
        ),
        ("cron", [("0 0 1 1 *", {}), ("@yearly", {}), ("@annually", {})], "cron 0 0 1 1 * UTC"),
        ("cron", [("0 0 1 * *", {}), ("@monthly", {})], "cron 0 0 1 * * UTC"),
        ("cron", [("0 0 * * 0", {}), ("@weekly", {})], "cron 0 0 * * 0 UTC"),
        ("cron", [("0 * * * *", {}), ("@hourly", {})], "cron 0 * * * * UTC"),
        (
            "cron",
            [("0 0 */2 * 1", {}), ("0 0 */2 * mon", {})],
            "cron 0 0 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 * 1 UTC, days matching both",
        ),
        (
            "cron",
            [("*/15 * * * *", BERLIN), ("0,15,30,45 * * * *", BERLIN)],
            "cron 0,15,30,45 * * * * Europe/Berlin",
        ),
        ("cron", [("0 2 * * *", BERLIN), ("0 2 1-31 * *", BERLIN)], "cron 0 2 * * * Europe/Berlin"),
        (
            "cron",
            [
                ("*/15 9-17 * * mon-fri", {}),
                ("0,15,30,45 9,10,11,12,13,14,15,16,17 * * 1,2,3,4,5", {}),
                ("0-59/15 9-17 * * 5,4,3,2,1", {}),
            ],
            "cron 0,15,30,45 9-17 * * 1-5 UTC",
        ),
        (
            "daily",
            [
                ("02:00", {}),
                ("2:00", {}),
                ("02:00", {"deadline": "6h"}),
                (" 02:00", {"deadline": "360m"}),
            ],
            "daily 02:00 UTC deadline 6h",
        ),
        (
            "weekly",
            [("mon 02:00", {"deadline": "1h30m"}), ("Monday 2:00", {"deadline": "90m"})],
            "weekly mon 02:00 UTC deadline 1h30m",
        ),
    ],
)
def test_equivalent_specs_describe_alike(
    key: str, specs: list[tuple[str, dict[str, Any]]], text: str
) -> None:
    assert {describe(key, spec, options) for spec, options in specs} == {text}


def test_different_timings_describe_differently() -> None:
    texts = [
        describe("every", "15m"),
        describe("every", "16m"),
        describe("cron", "0 2 * * *"),
        describe("cron", "0 2 * * *", {"timezone": "Europe/Berlin"}),
        describe("cron", "0 2 * * 1"),
        describe("daily", "02:00"),
        describe("daily", "02:00", {"timezone": "Europe/Berlin"}),
        describe("daily", "02:00", {"deadline": "2h"}),
        describe("daily", "02:01"),
        describe("weekly", "mon 02:00"),
        describe("weekly", "tue 02:00"),
    ]
    assert len(set(texts)) == len(texts)


@pytest.mark.parametrize(
    ("key", "spec", "options", "message"),
    [
        ("daily", "25:00", {}, 'daily = "25:00": hour 25 is out of range (00-23)'),
        ("daily", "24:00", {}, 'daily = "24:00": hour 24 is out of range (00-23)'),
        ("daily", "02:60", {}, 'daily = "02:60": minute 60 is out of range (00-59)'),
        ("daily", "2am", {}, 'daily = "2am": bad time \'2am\' (use HH:MM, like "02:00")'),
        (
            "daily",
            "02:00:30",
            {},
            'daily = "02:00:30": bad time \'02:00:30\' (use HH:MM, like "02:00")',
        ),
        ("daily", 2, {}, 'daily = 2: must be a text like "02:00"'),
        (
            "weekly",
            "funday 02:00",
            {},
            "weekly = \"funday 02:00\": unknown day 'funday' "
            "(use mon, tue, wed, thu, fri, sat, sun)",
        ),
        ("weekly", "02:00", {}, 'weekly = "02:00": use DAY HH:MM, like "mon 02:00"'),
        ("weekly", "mon 25:00", {}, 'weekly = "mon 25:00": hour 25 is out of range (00-23)'),
        (
            "daily",
            "02:00",
            {"timezone": "Mars/Olympus_Mons"},
            'timezone = "Mars/Olympus_Mons": unknown time zone '
            '(use an IANA name like "Europe/Berlin" or "UTC")',
        ),
        (
            "cron",
            "0 2 * * *",
            {"timezone": "../etc/passwd"},
            'timezone = "../etc/passwd": unknown time zone '
            '(use an IANA name like "Europe/Berlin" or "UTC")',
        ),
        (
            "daily",
            "02:00",
            {"timezone": 1},
            'timezone = 1: must be an IANA time zone name like "Europe/Berlin"',
        ),
        ("daily", "02:00", {"deadline": "0s"}, 'deadline = "0s": must be more than 0s'),
        (
            "daily",
            "02:00",
            {"deadline": "2x"},
            "deadline = \"2x\": unknown unit 'x' (use s, m, h, d)",
        ),
        ("daily", "02:00", {"deadline": 7200}, 'deadline = 7200: must be a text like "2h"'),
        (
            "daily",
            "02:00",
            {"deadline": "25h"},
            'deadline = "25h": must be at most 1d for a daily schedule '
            "(the next slot would be due before it ends)",
        ),
        (
            "weekly",
            "mon 02:00",
            {"deadline": "8d"},
            'deadline = "8d": must be at most 7d for a weekly schedule '
            "(the next slot would be due before it ends)",
        ),
        (
            "cron",
            "0 0 2 * * *",
            {},
            'cron = "0 0 2 * * *": need 5 fields (minute hour day-of-month month day-of-week), '
            "got 6 (seconds are not supported)",
        ),
        (
            "cron",
            "@reboot",
            {},
            'cron = "@reboot": @reboot is not a time (it runs when cron starts)',
        ),
        (
            "cron",
            "",
            {},
            'cron = "": need 5 fields (minute hour day-of-month month day-of-week), got 0',
        ),
        (
            "cron",
            "61 * * * *",
            {},
            "cron = \"61 * * * *\": bad minute field '61': 61 is out of range (0-59)",
        ),
        ("cron", "0 2 30 2 *", {}, 'cron = "0 2 30 2 *": never due (no such date)'),
        (
            "cron",
            "H * * * *",
            {},
            "cron = \"H * * * *\": 'H' not allowed in the minute field "
            "(use numbers, *, ranges a-b, steps /n and lists a,b)",
        ),
        (
            "cron",
            "0 2 L * *",
            {},
            "cron = \"0 2 L * *\": 'L' not allowed in the day-of-month field "
            "(use numbers, *, ranges a-b, steps /n and lists a,b)",
        ),
        (
            "cron",
            "0 2 * * 5#2",
            {},
            "cron = \"0 2 * * 5#2\": '5#2' not allowed in the day-of-week field "
            "(use numbers, names sun..sat, *, ranges a-b, steps /n and lists a,b)",
        ),
        (
            "cron",
            "0 2 * * mon",
            {"deadline": "1h"},
            'deadline = "1h": not used by cron schedules: '
            "a slot's deadline is the next slot's due time",
        ),
        (
            "cron",
            "0 2 * mon *",
            {},
            "cron = \"0 2 * mon *\": 'mon' not allowed in the month field "
            "(use numbers, names jan..dec, *, ranges a-b, steps /n and lists a,b)",
        ),
        (
            "cron",
            "0 2 * * 8",
            {},
            "cron = \"0 2 * * 8\": bad day-of-week field '8': 8 is out of range (0-7)",
        ),
        (
            "cron",
            "*/0 * * * *",
            {},
            "cron = \"*/0 * * * *\": bad minute field '*/0': step '0' in '*/0' must be a whole "
            "number from 1",
        ),
        (
            "cron",
            "0 2 * * fri-mon",
            {},
            "cron = \"0 2 * * fri-mon\": bad day-of-week field 'fri-mon': range 'fri-mon' ends "
            "before it starts (cron ranges do not wrap around: write two ranges)",
        ),
    ],
)
def test_bad_specs(key: str, spec: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        FUNCTIONS[key].parse(spec, options)
    assert str(caught.value) == message


def test_registered_through_the_entry_point() -> None:
    plugins = fdcore.plugins.load_plugins()
    every = plugins.get(fdcore.plugins.SLOT, "every")
    assert isinstance(every, Every)
    assert set(plugins.implementations(fdcore.plugins.SLOT)) == {"every", "cron", "daily", "weekly"}
    info = next(i for i in plugins.infos if i.distribution == "fdcore-slots")
    assert info.error is None
    assert info.provides["slot function"] == ["every", "cron", "daily", "weekly"]
    for name, function in plugins.implementations(fdcore.plugins.SLOT).items():
        assert isinstance(function, SlotFunction)
        assert function.name == name
    assert isinstance(every.parse("1h", {}), Timetable)
