"""Bad mailbox files and bad config: reported once, naming file and field; the rest runs."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import fdcore_plugin_template
import pytest

from fdcore.cli.config import load_config
from fdcore.cli.main import main
from fdcore.contract.codec import parse_time
from fdcore.contract.models import State
from fdcore.environment.queue import queue_rows
from fdcore.errors import ConfigError, PluginError
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import Plugins, load_plugins
from fdcore.testing.memory_fleet import START, MemoryFleet

GOOD_STATUS = (
    b'{"request": "%s", "state": "running", "agent": "ghost", "updated_at": "2027-01-15T02:00:00Z"'
)


def problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("key", "content", "expected"),
    [
        ("requests/bad.json", b"{not json", "requests/bad.json: not valid JSON"),
        (
            "requests/bad.json",
            b'{"id": "bad", "entities": "sales", "created_at": "2027-01-15T02:00:00Z"}',
            "requests/bad.json: field 'entities'",
        ),
        (
            "requests/bad.json",
            b'{"id": "../x", "entities": ["sales"], "created_at": "2027-01-15T02:00:00Z"}',
            "requests/bad.json: field 'id': invalid request id '../x'",
        ),
        (
            "requests/bad.json",
            b'{"id": "other", "entities": ["sales"], "created_at": "2027-01-15T02:00:00Z"}',
            "requests/bad.json: field 'id': 'other' does not match the file name",
        ),
        ("requests/bad name.json", b"{}", "requests/bad name.json: file name is not"),
        (
            "status/bad.json",
            GOOD_STATUS.replace(b"%s", b"bad") + b', "attempt": "two"}',
            "status/bad.json: field 'attempt': expected int, got str",
        ),
    ],
)
def test_bad_mailbox_file_is_reported_once_and_skipped(
    fdcore_memory_fleet: MemoryFleet,
    caplog: pytest.LogCaptureFixture,
    key: str,
    content: bytes,
    expected: str,
) -> None:
    if key.startswith("status/"):
        submit(fdcore_memory_fleet.mailbox, ["t"], request_id="bad", now=START)
    fdcore_memory_fleet.storage.create(key, content)
    submit(fdcore_memory_fleet.mailbox, ["sales"], request_id="good", now=START)
    agent = fdcore_memory_fleet.agent("etl-01", take_over=True)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            agent.poll()
            fdcore_memory_fleet.finish_runs()
            fdcore_memory_fleet.clock.advance(120)  # past stale_after: status sweeps run every poll
    reported = [m for m in problems(caplog) if expected in m]
    assert len(reported) == 1, problems(caplog)
    good = fdcore_memory_fleet.mailbox.status("good")
    assert good is not None and good.value.state is State.SUCCEEDED


def test_a_misnamed_request_is_unreadable_in_the_queue_never_waiting(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    misnamed = b'{"id": "other", "entities": ["sales"], "created_at": "2027-01-15T02:00:00Z"}'
    fdcore_memory_fleet.storage.create("requests/bad.json", misnamed)
    [row] = queue_rows(fdcore_memory_fleet.mailbox)
    assert (row.id, row.state) == ("bad", "unreadable")
    assert row.message == "requests/bad.json: field 'id': 'other' does not match the file name"


@pytest.mark.parametrize("content", [b"{not json", b'{"request": "other", "by": "x", "at": 1}'])
def test_a_malformed_cancel_is_reported_once_and_its_request_runs(
    fdcore_memory_fleet: MemoryFleet, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    fleet = fdcore_memory_fleet
    submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
    fleet.storage.create("cancels/r1.json", content)
    [row] = queue_rows(fleet.mailbox)
    assert row.state == "waiting"  # the agents will run it: the queue says why it is no cancel
    assert row.cancel_problem and row.cancel_problem.startswith("cancels/r1.json: ")
    agent = fleet.agent("etl-01")
    caplog.clear()  # the queue's own report of it
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            agent.poll()
            fleet.finish_runs()
    status = fleet.mailbox.status("r1")
    assert status is not None and status.value.state is State.SUCCEEDED
    assert sum(m.startswith("skipping cancels/r1.json") for m in problems(caplog)) == 1


def test_bad_lease_file_is_reported_and_the_table_waits(
    fdcore_memory_fleet: MemoryFleet, caplog: pytest.LogCaptureFixture
) -> None:
    fdcore_memory_fleet.storage.create("leases/sales.json", b'{"table": "sales"}')
    submit(fdcore_memory_fleet.mailbox, ["sales"], request_id="r1", now=START)
    submit(fdcore_memory_fleet.mailbox, ["other"], request_id="r2", now=START)
    agent = fdcore_memory_fleet.agent("etl-01", concurrency=2)
    with caplog.at_level(logging.WARNING):
        agent.poll()
        agent.poll()
    assert [run.job.table for run in fdcore_memory_fleet.runs] == ["other"]
    assert sum("leases/sales.json: field" in m for m in problems(caplog)) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[agent]\nname = "a"\nenvironment = "x"\npoll_secs = 5\n',
            "[agent] poll_secs: unknown key; did you mean 'poll_seconds'?",
        ),
        (
            '[agent]\nname = "a"\nenvironment = "x"\nconcurrency = "2"\n',
            "[agent] concurrency: expected an integer, got '2'",
        ),
        ('[agent]\nname = "../a"\nenvironment = "x"\n', "[agent] name: invalid agent name '../a'"),
        ('[agent]\nenvironment = "x"\n', "[agent] name: missing (required)"),
        (
            '[agent]\nname = "a"\nenvironment = "x"\n[pipline]\n',
            "[pipline]: unknown table; did you mean '[pipeline]'?",
        ),
        (
            '[agent]\nname = "a"\nenvironment = "x"\n[pipeline]\ntake_over = "yes"\n',
            "[pipeline] take_over: expected true or false, got 'yes'",
        ),
        (
            '[agent]\nname = "a"\nenvironment = "x"\n[pipeline]\nmax_attempts = 0\n',
            "[pipeline] max_attempts: must be 1..1000, got 0",
        ),
        (
            '[agent]\nname = "a"\nenvironment = "x"\n[runner]\ncommand = []\n',
            "[runner] command: expected a non-empty list of strings",
        ),
        (
            '[agent]\nname = "a"\nenvironment = "x"\n[[schedules]]\nid = "s"\n',
            "[[schedules]] #1 (s): needs exactly one of every, cron, daily, weekly",
        ),
        (
            '[agent]\nname = "a"\nenvironment = "x"\n[[schedules]]\nid = "s"\nevry = "1h"\n',
            "[[schedules]] #1 evry: unknown key; did you mean 'every'?",
        ),
        ("[agent\n", "not valid TOML"),
    ],
)
def test_bad_config_is_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_cli_reports_config_error_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[agent]\nname = "a"\nenvironment = "x"\nnmae = "b"\n')
    assert main(["agent", "run", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"fdcore: error: {path}: [agent] nmae: unknown key; did you mean 'name'?"


def test_missing_runner_command_is_reported_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        f'[agent]\nname = "a"\nenvironment = "{(tmp_path / "env").as_uri()}"\ncreate = true\n'
    )
    assert main(["agent", "run", "--config", str(path)]) == 2
    assert capsys.readouterr().err.strip().endswith("[runner] command: missing (required)")


def test_python_runner_function_that_does_not_load_is_reported_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.toml"
    env = (tmp_path / "env").as_uri()
    path.write_text(
        f'[agent]\nname = "a"\nenvironment = "{env}"\ncreate = true\n'
        '[runner]\nkind = "python"\nfunction = "no_such_module:table"\n'
    )
    assert main(["agent", "run", "--config", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"fdcore: error: {path}: [runner] function: cannot load 'no_such_module:table': "
        "No module named 'no_such_module'"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--entities", "a,../b"], "fdcore submit: --entities: invalid table name '../b'"),
        (["--entities", "a", "--id", "../x"], "fdcore submit: --id: invalid request id '../x'"),
        (["--entities", "a", "--deadline", "soon"], "fdcore submit: --deadline: neither a dur"),
        (
            ["--entities", "a", "--deadline", "2020-01-01T00:00Z"],
            "fdcore submit: --deadline: 2020-01-01T00:00:00.000Z is past: give a later time",
        ),
        (["--entities", "a", "--deadline", "0s"], "fdcore submit: --deadline: must be greater"),
        (["--entities", "a", "--max-attempts", "0"], "fdcore submit: --max-attempts: must be"),
    ],
)
def test_submit_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    env = (tmp_path / "env").as_uri()
    assert main(["submit", "--env", env, *args]) == 2
    assert capsys.readouterr().err.startswith(f"fdcore: error: {expected}")
    assert not list((tmp_path / "env").glob("requests/*"))


def test_submit_takes_a_deadline_as_a_duration_from_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = (tmp_path / "env").as_uri()
    assert main(["init", env]) == 0
    before = datetime.now(timezone.utc)
    assert main(["submit", "--env", env, "--entities", "a", "--id", "r1", "--deadline", "10m"]) == 0
    after = datetime.now(timezone.utc)
    assert capsys.readouterr().out.splitlines()[-1] == "r1"
    request = json.loads((tmp_path / "env" / "requests" / "r1.json").read_text())
    deadline = parse_time(request["deadline"])
    assert before + timedelta(minutes=10) <= deadline + timedelta(milliseconds=1)
    assert deadline <= after + timedelta(minutes=10)
    # The same command again, later (a retry after a lost answer): the same request, not other
    # work, though "10m from now" is another time now; another duration is other work.
    time.sleep(0.01)
    assert main(["submit", "--env", env, "--entities", "a", "--id", "r1", "--deadline", "10m"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "r1"
    assert json.loads((tmp_path / "env" / "requests" / "r1.json").read_text()) == request
    assert main(["submit", "--env", env, "--entities", "a", "--id", "r1", "--deadline", "11m"]) == 2
    assert "already exists with other work (deadline=" in capsys.readouterr().err


# -- schedule timing keys: the installed slot functions' names ---------------------------------

WITH_MONTHLY = '[agent]\nname = "a"\nenvironment = "x"\n[[schedules]]\nid = "s"\n'


@pytest.fixture
def with_monthly() -> Plugins:
    """The installed plugins and the template's, which adds the ``monthly`` slot function."""
    return load_plugins(extra=[("plugin-template", fdcore_plugin_template)])


def test_a_plugins_slot_function_is_a_timing_key(tmp_path: Path, with_monthly: Plugins) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(WITH_MONTHLY + 'monthly = "1 02:00"\ntimezone = "Europe/Berlin"\n')
    [schedule] = load_config(path, with_monthly).schedules
    assert (schedule.timing, schedule.spec) == ("monthly", "1 02:00")
    assert schedule.options == {"timezone": "Europe/Berlin"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('monthy = "1 02:00"\n', "[[schedules]] #1 monthy: unknown key; did you mean 'monthly'?"),
        ("", "[[schedules]] #1 (s): needs exactly one of every, cron, daily, weekly, monthly"),
        (
            'monthly = "1 02:00"\nevery = "1h"\n',
            "[[schedules]] #1 (s): needs exactly one of every, cron, daily, weekly, monthly",
        ),
        ("monthly = 1\n", "[[schedules]] #1 monthly: expected a string, got 1"),
    ],
)
def test_timing_key_mistakes_list_the_installed_slot_functions(
    tmp_path: Path, with_monthly: Plugins, text: str, expected: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(WITH_MONTHLY + text)
    with pytest.raises(ConfigError) as info:
        load_config(path, with_monthly)
    assert str(info.value) == f"{path}: {expected}"


def test_without_the_slot_function_the_key_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(WITH_MONTHLY + 'monthly = "1 02:00"\n')
    with pytest.raises(ConfigError, match="monthly: unknown key \\(known: id, shared"):
        load_config(path)


def test_a_timing_key_of_ours_not_installed_names_the_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDCORE_DISABLE_PLUGINS", "fdcore-slots")
    path = tmp_path / "agent.toml"
    path.write_text(WITH_MONTHLY + 'every = "1h"\n')
    with pytest.raises(PluginError) as info:
        load_config(path)
    assert str(info.value).startswith("no installed plugin provides slot function 'every'")
    assert str(info.value).endswith("; fdcore-slots is disabled by FDCORE_DISABLE_PLUGINS")


def test_a_malformed_file_is_not_decoded_again_until_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fdcore.mailbox.access as access
    from fdcore.builtin.memory import MemoryStorage
    from fdcore.mailbox.access import Mailbox

    decoded: list[str] = []
    real_decode = access.decode

    def counting_decode(cls: type, data: bytes, key: str, max_bytes: int) -> object:
        decoded.append(key)
        return real_decode(cls, data, key, max_bytes)

    monkeypatch.setattr(access, "decode", counting_decode)
    storage = MemoryStorage.fresh("bad-once")
    mailbox = Mailbox(storage)
    etag = storage.create("requests/r1.json", b"[" * 10_000)
    for _ in range(3):
        assert mailbox.read_or_report(access.Request, "requests/r1.json") is None
    assert decoded == ["requests/r1.json"]
    assert len(mailbox.problems.reported) == 1
    good = b'{"id": "r1", "entities": ["a"], "created_at": "2027-01-15T02:00:00Z"}'
    storage.replace("requests/r1.json", good, etag)
    found = mailbox.read_or_report(access.Request, "requests/r1.json")
    assert found is not None and found.value.id == "r1"
    assert decoded == ["requests/r1.json"] * 2
