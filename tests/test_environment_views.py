"""The views and operator helpers ``fdcore.environment`` exports beside ``Environment``: what the
commands and the monitor build their tables from, tried directly on a local folder."""

from __future__ import annotations

import getpass
import json
import socket
from datetime import timedelta
from pathlib import Path

import attrs
import pytest
from fdcore_localfs.store import LocalFolderStorage

from fdcore.abc import HostSlots
from fdcore.cli.main import main
from fdcore.clock import ManualClock
from fdcore.environment import (
    DEFAULT_GRACE,
    DEFAULT_POLL,
    FILE_BOUND_VARIABLE,
    Environment,
    ScheduleRow,
    describe_attempts,
    schedule_rows,
    schedule_warnings,
    shared_by,
    with_host_folder,
    with_host_slots,
)
from fdcore.environment.actions import (
    acknowledge_incident,
    open_mailbox,
    operator_file_bound,
    operator_name,
)
from fdcore.environment.views import agent_rows
from fdcore.errors import ConfigError, EnvironmentNotFound
from fdcore.incidents.book import Finding, IncidentBook, report
from fdcore.mailbox.submit import submit
from fdcore.mailbox.verdict import AgentVerdicts
from fdcore.plugins.manager import load_plugins
from fdcore.settings.agent_toml import ScheduleConfig
from fdcore.settings.checks import GRACE
from fdcore.testing.memory_fleet import START, MemoryFleet

HOURLY = ScheduleConfig(id="hourly", entities=("sales",), timing="every", spec="1h", shared=True)
# The same id with other tables on another agent: a conflict operators must hear about.
HOURLY_ELSEWHERE = attrs.evolve(HOURLY, entities=("customers",))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    LocalFolderStorage(tmp_path / "env", create=True)
    return tmp_path / "env"


@pytest.fixture
def fleet(folder: Path) -> MemoryFleet:
    return MemoryFleet(LocalFolderStorage(folder), ManualClock(START))  # type: ignore[arg-type]


def test_the_defaults_are_the_declared_ones(folder: Path) -> None:
    assert GRACE.default == DEFAULT_GRACE
    assert Environment.open(str(folder)).poll == DEFAULT_POLL


def test_open_mailbox_opens_only_an_environment_that_exists(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentNotFound):
        open_mailbox(str(tmp_path / "nothing"))
    assert not (tmp_path / "nothing").exists()
    mailbox = open_mailbox(str(tmp_path / "new"), create=True, max_file_bytes=4096)
    assert mailbox.max_file_bytes == 4096 and (tmp_path / "new").is_dir()


def test_the_operators_file_bound_comes_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FILE_BOUND_VARIABLE, "8192")
    assert operator_file_bound() == 8192
    monkeypatch.setenv(FILE_BOUND_VARIABLE, "8k")
    with pytest.raises(ConfigError) as raised:
        operator_file_bound()
    assert str(raised.value).count("\n") == 0 and FILE_BOUND_VARIABLE in str(raised.value)


def no_takeover_policy() -> AgentVerdicts:
    """Verdicts where no takeover policy is installed (the core's built-ins alone)."""
    return AgentVerdicts(load_plugins(use_entry_points=False))


def test_operator_name_is_user_at_host() -> None:
    assert operator_name() == f"{getpass.getuser()}@{socket.gethostname()}"


def test_agent_rows_show_a_silent_agent_lost_only_with_a_takeover_policy(
    folder: Path, fleet: MemoryFleet
) -> None:
    fleet.agent("etl-01").poll()
    mailbox = open_mailbox(str(folder))
    # The agent writes its record in the store's time (the folder's clock), not its own.
    [row] = agent_rows(mailbox, START, no_takeover_policy(), DEFAULT_GRACE)
    seen = row.last_seen
    assert seen is not None
    later = seen + timedelta(hours=1)
    verdicts = AgentVerdicts()  # fdcore-takeover is installed here
    assert [row.state for row in agent_rows(mailbox, seen, verdicts, DEFAULT_GRACE)] == ["live"]
    assert [row.state for row in agent_rows(mailbox, later, verdicts, DEFAULT_GRACE)] == ["lost"]
    assert not verdicts.problems
    without = no_takeover_policy()
    assert [row.state for row in agent_rows(mailbox, later, without, DEFAULT_GRACE)] == ["stale"]
    assert "'stale_record'" in without.problems["stale_record"]


def test_schedule_rows_warnings_and_shared_by(folder: Path, fleet: MemoryFleet) -> None:
    fleet.agent("etl-01", schedules=(HOURLY,)).poll()
    fleet.agent("etl-02", schedules=(HOURLY,)).poll()
    agents = agent_rows(open_mailbox(str(folder)), START, no_takeover_policy(), DEFAULT_GRACE)
    [row] = schedule_rows(agents)
    assert isinstance(row, ScheduleRow)
    assert (row.id, row.shared, row.entities, row.agents) == (
        "hourly",
        True,
        ["sales"],
        ["etl-01", "etl-02"],
    )
    assert shared_by(agents) == {"hourly": ["etl-01", "etl-02"]}
    assert schedule_warnings(agents) == []
    fleet.agent("etl-03", schedules=(HOURLY_ELSEWHERE,)).poll()
    agents = agent_rows(open_mailbox(str(folder)), START, no_takeover_policy(), DEFAULT_GRACE)
    [warning] = schedule_warnings(agents)
    assert "hourly" in warning and "etl-03" in warning


def test_an_older_records_schedule_without_entities_shows_unknown(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An older agent's record, written by hand: its schedule names no tables at all.
    (folder / "agents").mkdir(exist_ok=True)
    (folder / "agents" / "etl-old.json").write_text(
        '{"name": "etl-old", "updated_at": "2026-09-01T00:00:00Z", "stale_after": 60,'
        ' "schedules": [{"id": "hourly", "shared": true, "when": "every 3600s"}]}'
    )
    agents = agent_rows(open_mailbox(str(folder)), START, no_takeover_policy(), DEFAULT_GRACE)
    [row] = schedule_rows(agents)
    assert (row.entities, row.tables) == (None, "unknown")
    assert Environment.open(str(folder)).schedules()[0].entities is None
    assert main(["schedules", "--env", str(folder)]) == 0
    line = capsys.readouterr().out.splitlines()[1].split()
    assert line[:4] == ["hourly", "yes", "every", "3600s"] and line[4] == "unknown"
    assert main(["schedules", "--env", str(folder), "--json"]) == 0
    assert '"entities": null' in capsys.readouterr().out


def test_owners_and_last_jobs_show_in_the_agents_and_schedules_views(
    folder: Path, fleet: MemoryFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    own = attrs.evolve(HOURLY, id="own", owner="finance")
    agent = fleet.agent("etl-01", owner="data team", schedules=(HOURLY, own))
    submit(fleet.mailbox, ["sales", "stock"], request_id="r1", now=START)
    for _ in range(3):
        agent.poll()
        fleet.finish_runs()
    fleet.clock.advance(60)  # past a heartbeat: the record is rewritten
    agent.poll()
    [row] = agent_rows(open_mailbox(str(folder)), START, no_takeover_policy(), DEFAULT_GRACE)
    assert row.owner == "data team"
    assert [(j.request, j.table, j.outcome.value) for j in row.last_jobs or []] == [
        ("r1", "sales", "succeeded"),
        ("r1", "stock", "succeeded"),
    ]
    assert {s.id: s.owner for s in schedule_rows([row])} == {
        "hourly": "data team",
        "own": "finance",
    }
    assert main(["agents", "--env", str(folder)]) == 0
    header, line = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[:3] == ["AGENT", "STATE", "OWNER"] and "data team" in line
    assert main(["agents", "--env", str(folder), "--json"]) == 0
    [shown] = json.loads(capsys.readouterr().out)["agents"]
    assert shown["owner"] == "data team" and shown["last_jobs"][-1]["table"] == "stock"


def test_describe_attempts_marks_a_lost_agents_running_attempt(
    folder: Path, fleet: MemoryFleet
) -> None:
    fleet.agent("etl-01").poll()
    env = Environment.open(str(folder))
    env.submit(["sales"], id="r1")
    fleet.agent("etl-01").poll()
    [row] = env.queue().rows
    assert describe_attempts(row, {"etl-01": "live"}) == "etl-01 running"
    assert describe_attempts(row, {"etl-01": "lost"}) == "etl-01 lost?"


def test_host_slots_go_on_the_rows_of_this_machines_agents(
    folder: Path, fleet: MemoryFleet, tmp_path: Path
) -> None:
    fleet.agent("etl-01").poll()
    rows = agent_rows(open_mailbox(str(folder)), START, no_takeover_policy(), DEFAULT_GRACE)
    [row] = with_host_slots(rows, HostSlots(configured=4, busy=1), rows[0].record.host)  # type: ignore[union-attr]
    assert (row.configured_slots, row.busy_slots) == (4, 1)
    assert with_host_slots(rows, HostSlots(4, 1), "another-host") == rows
    host = str(tmp_path / "host")
    assert main(["host", "init", "--host", host]) == 0
    assert main(["host", "set-slots", "3", "--host", host]) == 0
    assert rows[0].record.host == socket.gethostname()  # type: ignore[union-attr]
    [row] = with_host_folder(rows, host, "slots")
    assert (row.configured_slots, row.busy_slots) == (3, 0)


def test_acknowledge_incident_records_who(folder: Path) -> None:
    mailbox = open_mailbox(str(folder))
    IncidentBook(mailbox).change(
        lambda document: report(
            document, Finding("agent_offline", "etl-02", "etl-02 is offline"), START, "test"
        )
    )
    [incident] = IncidentBook(mailbox).read().open
    assert acknowledge_incident(mailbox, incident.id, START, "ann").acknowledged_by == "ann"
    with pytest.raises(ConfigError):
        acknowledge_incident(mailbox, "no-such-incident", START, "ann")
