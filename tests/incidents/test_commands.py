"""``fdcore incidents``, agent.toml's [incidents] and route keys, and the agent's timer."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fdcore.cli.config import load_config
from fdcore.cli.main import main
from fdcore.cli.runtime import AgentRuntime
from fdcore.contract.codec import parse_time
from fdcore.contract.layout import INCIDENTS, status_key
from fdcore.contract.models import State, Status
from fdcore.errors import ConfigError
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins
from fdcore.settings.agent_toml import QuietHours
from fdcore.testing.webhook import Answer, recording_webhook

VARIABLE = "FDCORE_TEST_TEAMS_WEBHOOK"


def failed_environment(tmp_path: Path, *requests: str) -> str:
    env = str(tmp_path / "env")
    mailbox = Mailbox(load_plugins().open_storage(env))
    for request in requests:
        now = datetime.now(timezone.utc)  # within the lookback of a real-time evaluation
        status = Status(request, State.FAILED, now, message="boom")
        mailbox.create(status_key(request), status)
    return env


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_evaluate_list_show_ack_note_resolve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = failed_environment(tmp_path, "r-1")
    code, out, _ = run(capsys, "incidents", "evaluate", "--env", env)
    assert (code, out) == (0, "opened inc-0001 request_failed:r-1\n")
    code, out, _ = run(capsys, "incidents", "list", "--env", env)
    assert code == 0 and "inc-0001  open" in out and "r-1" in out
    assert run(capsys, "incidents", "ack", "inc-0001", "--env", env, "--by", "ann")[1] == (
        "inc-0001 acknowledged\n"
    )
    run(capsys, "incidents", "note", "inc-0001", "rerun after the fix", "--env", env, "--by", "ann")
    code, out, _ = run(capsys, "incidents", "show", "request_failed:r-1", "--env", env)
    assert "acknowledged: " in out and "by ann" in out and "rerun after the fix" in out
    assert run(capsys, "incidents", "resolve", "inc-0001", "--env", env, "--by", "bob")[1] == (
        "inc-0001 resolved\n"
    )
    code, out, _ = run(capsys, "incidents", "list", "--env", env, "--all", "--json")
    (incident,) = json.loads(out)["incidents"]
    assert (incident["state"], incident["resolved_by"], incident["acknowledged_by"]) == (
        "resolved",
        "bob",
        "ann",
    )
    assert run(capsys, "incidents", "evaluate", "--env", env)[1] == ""  # resolved: not reopened


def test_ack_records_the_user_name_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = failed_environment(tmp_path, "r-1")
    run(capsys, "incidents", "evaluate", "--env", env)
    monkeypatch.setattr("getpass.getuser", lambda: "carol")
    code, out, _ = run(capsys, "incidents", "ack", "inc-0001", "--env", env, "--json")
    assert code == 0 and json.loads(out)["acknowledged_by"] == "carol"


def test_an_environment_not_set_up_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nowhere")
    for argv in (("evaluate",), ("list",), ("ack", "inc-0001")):
        code, out, err = run(capsys, "incidents", *argv, "--env", missing)
        assert code == 2 and out == ""
        assert err.startswith("fdcore: error: ") and err.count("\n") == 1
        assert "nowhere" in err
    assert not Path(missing).exists()  # nothing was created, no incident written


def test_an_unknown_incident_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = failed_environment(tmp_path)
    code, _, err = run(capsys, "incidents", "show", "inc-0404", "--env", env)
    assert code == 2 and "no incident 'inc-0404'" in err


AGENT = '[agent]\nname = "etl-01"\nenvironment = "{env}"\n[runner]\ncommand = ["true"]\n'


def test_incidents_and_route_keys_in_agent_toml(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        AGENT.format(env=tmp_path)
        + '[incidents]\nenabled = true\nevery = "30s"\n'
        + '[notify.routes.oncall]\nnotifier = "log"\nkinds = ["agent_offline"]\n'
        + 'escalate_after = "15m"\ndigest = "5m"\n'
        + 'quiet_hours = {start = "22:00", end = "07:00", timezone = "Europe/Berlin"}\n'
    )
    config = load_config(path)
    assert (config.incidents.enabled, config.incidents.every) == (True, 30.0)
    (route,) = config.routes
    assert route.options == {}  # the incident keys are fdcore's, not the notifier's
    assert (route.kinds, route.escalate_after, route.digest) == (("agent_offline",), 900.0, 300.0)
    assert route.quiet_hours == QuietHours(
        parse_time("2026-01-01T22:00:00Z").time(),
        parse_time("2026-01-01T07:00:00Z").time(),
        "Europe/Berlin",
    )
    path.write_text(AGENT.format(env=tmp_path))
    assert load_config(path).incidents.enabled is False  # off unless asked for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[incidents]\nenabled = 1\n", "[incidents] enabled: expected true or false"),
        ('[incidents]\nevery = "soon"\n', "[incidents] every: "),
        ('[incidents]\nevry = "1m"\n', "did you mean 'every'"),
        ('[notify.routes.a]\nnotifier = "log"\nkinds = ["fire"]\n', "unknown incident kind 'fire'"),
        ('[notify.routes.a]\nnotifier = "log"\nescalate_after = true\n', "expected a number"),
        ('[notify.routes.a]\nnotifier = "log"\nescalate_after = -5\n', "escalate_after: must be"),
        (
            '[notify.routes.a]\nnotifier = "log"\nquiet_hours = {start = "22:00"}\n',
            "quiet_hours.end: missing",
        ),
        (
            '[notify.routes.a]\nnotifier = "log"\n'
            'quiet_hours = {start = "22:00", end = "7", timezone = "UTC"}\n',
            "quiet_hours.end: expected a time",
        ),
        (
            '[notify.routes.a]\nnotifier = "log"\n'
            'quiet_hours = {start = "22:00", end = "07:00", timezone = "Mars/Base"}\n',
            "unknown IANA time zone 'Mars/Base'",
        ),
    ],
)
def test_bad_incident_settings_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(AGENT.format(env=tmp_path) + text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert expected in str(info.value) and str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_a_hanging_webhook_does_not_delay_the_agents_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = failed_environment(tmp_path, "r-1")
    path = tmp_path / "agent.toml"
    path.write_text(
        AGENT.format(env=env)
        + '[incidents]\nenabled = true\nevery = "1s"\n'
        + f'[notify.routes.oncall]\nnotifier = "teams"\nwebhook_env = "{VARIABLE}"\n'
        + 'timeout = "3s"\nretry_for = "3s"\n'
    )
    with recording_webhook([Answer(200, delay=30)] * 3) as server:
        monkeypatch.setenv(VARIABLE, server.url())
        runtime = AgentRuntime(load_config(path))
        assert runtime.incidents is not None
        runtime.incidents.start()
        try:
            deadline = time.monotonic() + 5
            while not server.posts and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.posts, "the incident was never posted"
            slowest = 0.0
            for _ in range(10):  # while the post hangs
                started = time.monotonic()
                runtime.agent.poll()
                slowest = max(slowest, time.monotonic() - started)
            assert slowest < 0.5
        finally:
            runtime.incidents.stop(timeout=0.1)
    mailbox = Mailbox(load_plugins().open_storage(env))
    assert mailbox.storage.read(INCIDENTS) is not None


def test_an_agent_without_incidents_enabled_writes_and_posts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = failed_environment(tmp_path, "r-1")
    path = tmp_path / "agent.toml"
    path.write_text(
        AGENT.format(env=env)
        + f'[notify.routes.oncall]\nnotifier = "teams"\nwebhook_env = "{VARIABLE}"\n'
    )
    with recording_webhook() as server:
        monkeypatch.setenv(VARIABLE, server.url())
        runtime = AgentRuntime(load_config(path))
        assert runtime.incidents is None
        for _ in range(3):
            runtime.agent.poll()
    assert server.posts == []
    assert Mailbox(load_plugins().open_storage(env)).storage.read(INCIDENTS) is None
