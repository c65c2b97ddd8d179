"""No timing value can crash an agent: whatever text a timing key, ``timezone`` or ``deadline``
holds, agent.toml gives a one-line ConfigError or a schedule whose due times can be asked for."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fdcore.agent.schedules import build_schedules
from fdcore.cli.config import parse_config
from fdcore.cli.main import ERROR, main
from fdcore.errors import ConfigError
from fdcore.plugins import load_plugins

PLUGINS = load_plugins()
TIMINGS = ("every", "cron", "daily", "weekly")
INSTANTS = [
    datetime(1970, 1, 1, tzinfo=timezone.utc),
    datetime(2027, 3, 28, 1, 30, tzinfo=timezone.utc),
    datetime(2027, 10, 31, 0, 59, 59, tzinfo=timezone.utc),
    datetime(2099, 12, 31, 23, 59, tzinfo=timezone.utc),
]

# text near the valid forms finds more than text at random: pieces of timings glued together
PIECES = [
    "*",
    "/",
    "-",
    ",",
    " ",
    ":",
    "@",
    "0",
    "1",
    "5",
    "7",
    "12",
    "30",
    "59",
    "99",
    "3000000",
    "d",
    "h",
    "m",
    "s",
    "mon",
    "sun",
    "jan",
    "dec",
    "L",
    "#",
    "?",
    "@daily",
    "@reboot",
    "Europe",
    "Europe/Berlin",
    "UTC",
    "../",
    "\x00",
    "\u2028",
    "\u0663",
    "\uff11",
    ".5",
]
TEXT = st.one_of(st.text(), st.lists(st.sampled_from(PIECES), max_size=12).map("".join))


def check(entry: dict[str, Any]) -> None:
    data = {"agent": {"name": "a", "environment": "memory://"}, "schedules": [entry]}
    try:
        schedules = build_schedules(parse_config(data, "agent.toml", PLUGINS), PLUGINS)
    except ConfigError as exc:
        assert len(str(exc).splitlines()) == 1, str(exc)
        return
    for schedule in schedules:
        schedule.timetable.describe()
        for now in INSTANTS:
            schedule.timetable.latest_due(now)
            schedule.timetable.next_due(now)


@pytest.mark.parametrize("timing", TIMINGS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
@example(text="3000000d")  # the values issue 13 found crashing an agent, and their like
@example(text="1" + "0" * 400 + "d")
@example(text="\u0661\u0665m")
@example(text="\u0660\u0662:\u0660\u0660")
@example(text="0 3 * * 7-sun")
@example(text="@daily")
@example(text="*/" + "9" * 5000 + " * * * *")
def test_any_timing_text(timing: str, text: str) -> None:
    check({"id": "s", timing: text})


@pytest.mark.parametrize(("timing", "spec"), [("cron", "0 2 * * *"), ("daily", "02:00")])
@settings(max_examples=200, deadline=None)
@given(zone=TEXT)
@example(zone="Europe")
@example(zone="a" * 300)
def test_any_timezone_text(timing: str, spec: str, zone: str) -> None:
    check({"id": "s", timing: spec, "timezone": zone})


@settings(max_examples=200, deadline=None)
@given(deadline=TEXT)
def test_any_deadline_text(deadline: str) -> None:
    check({"id": "s", "weekly": "mon 02:00", "deadline": deadline})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('every = "3000000d"', 'every = "3000000d": must be at most 3650d (ten years)'),
        (
            'daily = "02:00"\ntimezone = "Europe"',
            'timezone = "Europe": unknown time zone (use an IANA name like "Europe/Berlin" or '
            '"UTC")',
        ),
        # Arabic-Indic digits
        ('every = "\u0661\u0665m"', 'every = "\u0661\u0665m": use ASCII digits and units'),
        ('daily = "\u0660\u0662:\u0660\u0660"', "bad time '\u0660\u0662:\u0660\u0660'"),
        ('cron = "0 3 * * 7-sun"', "range '7-sun' ends before it starts"),
    ],
)
def test_agent_run_says_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    config = tmp_path / "agent.toml"
    environment = tmp_path / "env"
    config.write_text(
        f'[agent]\nname = "a"\nenvironment = "{environment}"\ncreate = true\n\n'
        '[runner]\ncommand = ["true"]\n\n'
        f'[[schedules]]\nid = "s"\nentities = ["t"]\n{line}\n',
        encoding="utf-8",
    )
    # each of them fails at start-up: agent run does not go on to poll
    assert main(["agent", "run", "--config", str(config)]) == ERROR
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert message in err
