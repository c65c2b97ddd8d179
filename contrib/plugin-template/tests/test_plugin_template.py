"""The template's own tests: each of its implementations used through fdcore, with no other plugin.

``template_only`` (conftest.py) gives the core plus this distribution, so what a test shows works
does not lean on another plugin; its value is the environment for a subprocess.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import fdcore_plugin_template
import pytest

from fdcore import hookimpl
from fdcore.abc import AgentLoad, TakeoverPolicy
from fdcore.contract.models import AgentRecord
from fdcore.testing.commands import ERROR, run_fdcore
from fdcore.testing.memory_fleet import MemoryFleet
from fdcore.testing.plugins import CLAIM, SLOT, Plugins, load_plugins

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

UTC = timezone.utc
ROOT = Path(__file__).parents[1]


def test_entry_point_names_this_package() -> None:
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert [importlib.import_module(v) for v in entry_points["fdcore"].values()] == [
        fdcore_plugin_template
    ]


def test_only_the_core_and_this_plugin_are_loaded(template_only: dict[str, str]) -> None:
    plugins = load_plugins()
    assert [info.name for info in plugins.infos] == ["builtin", "commands", "plugin-template"]
    assert plugins.infos[-1].provides == {
        "claim policy": ["one_at_a_time"],
        "slot function": ["monthly"],
        "notifier": ["jsonl"],
        "command": ["monthly-slots"],
    }


def test_core_finds_the_claim_policy_by_name(template_only: dict[str, str]) -> None:
    policy = load_plugins().get(CLAIM, "one_at_a_time")
    assert policy.may_claim(AgentLoad(concurrency=4, running=0, waiting=0))
    assert not policy.may_claim(AgentLoad(concurrency=4, running=1, waiting=0))


# -- the monthly slot function ----------------------------------------------------------------


class TakeoverOff:
    """The agent below runs with take_over = false, so its takeover policy is never asked; the
    core still resolves one at start-up, and fdcore-takeover is not loaded here."""

    name = "stale_record"

    def is_lost(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> bool:
        raise AssertionError("take_over is false: no agent is judged")


class TakeoverOffPlugin:
    @hookimpl
    def fdcore_takeover_policies(self) -> Sequence[TakeoverPolicy]:
        return [TakeoverOff()]


@pytest.fixture
def fdcore_plugins(template_only: dict[str, str]) -> Plugins:
    """What ``fdcore_memory_fleet``'s agents resolve names with: the core, this plugin, and the
    takeover policy above (added without being installed)."""
    return load_plugins(extra=[("takeover-off", TakeoverOffPlugin())])


def test_an_agent_creates_the_monthly_slots_request(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    # 1 March 2027, 02:30 in Berlin (CET, UTC+1): the slot due at 02:00 local is open
    fleet.clock.advance(
        (datetime(2027, 3, 1, 1, 30, tzinfo=UTC) - fleet.clock.now()).total_seconds()
    )
    agent = fleet.agent_from_toml(
        '[agent]\nname = "etl-01"\n'
        '[pipeline]\nclaim = "one_at_a_time"\n'
        '[[schedules]]\nid = "month-end"\nshared = true\nentities = ["ledger"]\n'
        'monthly = "1 02:00"\ntimezone = "Europe/Berlin"\ndeadline = "12h"\n'
    )
    agent.poll()
    request = fleet.mailbox.request("sched-month-end-20270301T0100")
    assert request is not None
    assert request.value.entities == ["ledger"]
    assert request.value.created_at == datetime(2027, 3, 1, 1, 0, tzinfo=UTC)
    assert request.value.deadline == datetime(2027, 3, 1, 13, 0, tzinfo=UTC)
    record = fleet.mailbox.agent("etl-01")
    assert record is not None
    [schedule] = record.value.schedules
    assert schedule.when == "monthly 1 02:00 Europe/Berlin deadline 12h"
    # next due: 1 April, 02:00 in Berlin, now summer time (UTC+2)
    assert schedule.next_due == datetime(2027, 4, 1, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "options", "error"),
    [
        ("31 02:00", {}, 'monthly = "31 02:00": day 31 is out of range (1-28: every month has it)'),
        ("1st 02:00", {}, 'monthly = "1st 02:00": use DAY HH:MM, like "1 02:00"'),
        ("1 24:00", {}, 'monthly = "1 24:00": hour 24 is out of range (00-23)'),
        ("1 02:00", {"timezone": "Mars/Base"}, 'timezone = "Mars/Base": unknown time zone'),
        ("1 02:00", {"deadline": "30d"}, 'deadline = "30d": must be more than 0s and at most 28d'),
        ("1 02:00", {"deadline": "6"}, 'deadline = "6": missing unit after 6'),
    ],
)
def test_monthly_refuses_a_bad_timing_in_one_line(
    template_only: dict[str, str], spec: str, options: dict[str, str], error: str
) -> None:
    with pytest.raises(ValueError) as info:
        load_plugins().get(SLOT, "monthly").parse(spec, options)
    assert str(info.value).startswith(error)


def test_monthly_slots_across_the_year_and_a_clock_change(template_only: dict[str, str]) -> None:
    # Berlin's clocks go forward at 02:00 on 28 March 2027: 02:30 that day does not exist.
    timetable = load_plugins().get(SLOT, "monthly").parse("28 02:30", {"timezone": "Europe/Berlin"})
    now = datetime(2027, 3, 1, tzinfo=UTC)
    due = []
    for _ in range(3):
        slot = timetable.next_due(now)
        due.append(slot.due_at)
        now = slot.due_at
    assert due == [
        datetime(2027, 3, 28, 1, 30, tzinfo=UTC),  # 03:30 summer time: half an hour past the jump
        datetime(2027, 4, 28, 0, 30, tzinfo=UTC),
        datetime(2027, 5, 28, 0, 30, tzinfo=UTC),
    ]
    assert timetable.latest_due(datetime(2027, 1, 2, tzinfo=UTC)).due_at == datetime(
        2026, 12, 28, 1, 30, tzinfo=UTC
    )


# -- the jsonl notifier, through `fdcore notify test` ----------------------------------------


def _agent_toml(folder: Path, notes: Path) -> Path:
    path = folder / "agent.toml"
    path.write_text(
        '[agent]\nname = "etl-01"\nenvironment = "memory://notify"\n'
        f'[notify.routes.audit]\nnotifier = "jsonl"\npath = "{notes}"\n'
    )
    return path


def test_notify_test_sends_through_the_jsonl_notifier(
    template_only: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.jsonl"
    assert run_fdcore("notify", "test", "--config", str(_agent_toml(tmp_path, notes))) == 0
    assert capsys.readouterr().out == "OK audit (jsonl)\n"
    [sent] = [json.loads(line) for line in notes.read_text().splitlines()]
    assert sent["route"] == "audit"
    assert sent["environment"] == "memory://notify"
    assert sent["title"] == "fdcore test notification from agent etl-01"


def test_notify_test_fails_when_the_notifier_cannot_deliver(
    template_only: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "no-such-folder" / "notes.jsonl"
    assert run_fdcore("notify", "test", "--config", str(_agent_toml(tmp_path, notes))) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAILED audit (jsonl): FileNotFoundError: ")
    assert out.count("\n") == 1


def test_a_bad_notifier_option_names_file_and_route(
    template_only: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        '[agent]\nname = "etl-01"\nenvironment = "memory://notify"\n'
        '[notify.routes.audit]\nnotifier = "jsonl"\nfile = "x.jsonl"\n'
    )
    assert run_fdcore("notify", "test", "--config", str(path)) == ERROR
    assert capsys.readouterr().err == (
        f"fdcore: error: {path}: [notify.routes.audit]: "
        "file: unknown option (the jsonl notifier takes path)\n"
    )


# -- the monthly-slots subcommand, as a subprocess ------------------------------------------


def _fdcore(template_only: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args],
        capture_output=True,
        text=True,
        env=template_only,
        timeout=60,
    )


def test_fdcore_runs_the_plugins_subcommand(template_only: dict[str, str]) -> None:
    listed = _fdcore(template_only, "plugins", "--json")
    assert [row["name"] for row in json.loads(listed.stdout)] == [
        "builtin",
        "commands",
        "plugin-template",
    ]
    result = _fdcore(
        template_only,
        "monthly-slots",
        "1 02:00",
        "--timezone",
        "Europe/Berlin",
        "--after",
        "2027-02-15T00:00:00Z",
        "--count",
        "2",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "20270301T0100  2027-03-01 02:00 CET  deadline 2027-03-01 07:00 UTC",
        "20270401T0000  2027-04-01 02:00 CEST  deadline 2027-04-01 06:00 UTC",
    ]
    assert "monthly-slots" in _fdcore(template_only, "--help").stdout


def test_the_subcommands_bad_input_is_one_line(template_only: dict[str, str]) -> None:
    result = _fdcore(template_only, "monthly-slots", "32 02:00")
    assert result.returncode == 2
    assert result.stderr == (
        'fdcore: error: fdcore monthly-slots: SPEC: monthly = "32 02:00": '
        "day 32 is out of range (1-28: every month has it)\n"
    )
