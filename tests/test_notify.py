"""Notification routes: agent.toml, opened at start-up, sent without raising, `notify test`."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fdcore import hookimpl
from fdcore.abc import Notification, NotifierChannel, TableJob, TableRun
from fdcore.agent.components import build_components
from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.config import load_config, parse_config
from fdcore.cli.main import main
from fdcore.errors import ConfigError, PluginError
from fdcore.plugins.manager import load_plugins
from fdcore.plugins.routes import Delivery, open_routes
from fdcore.settings.agent_toml import RouteConfig

AGENT = '[agent]\nname = "etl-01"\nenvironment = "memory://notify"\n'


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(AGENT + text)
    return path


def notification(route: str) -> Notification:
    return Notification("prod", "inc-1", "Request r1 failed", "error", "three attempts", route)


class _Refusing:
    """A notifier whose every delivery fails, as a webhook that answers 500 would."""

    name = "refusing"

    def open(self, route: str, options: dict[str, Any]) -> NotifierChannel:
        return self

    def send(self, notification: Notification) -> None:
        raise ConnectionError("503 Service Unavailable\nRetry-After: 30")


class _RefusingPlugin:
    @hookimpl
    def fdcore_notifiers(self) -> Sequence[_Refusing]:
        return [_Refusing()]


def test_routes_are_read_in_order_with_their_options(tmp_path: Path) -> None:
    config = load_config(
        config_file(
            tmp_path,
            '[notify.routes.oncall]\nnotifier = "log"\n'
            '[notify.routes.teams-data]\nnotifier = "teams"\nwebhook_env = "TEAMS_URL"\n',
        )
    )
    assert config.routes == (
        RouteConfig("oncall", "log", {}),
        RouteConfig("teams-data", "teams", {"webhook_env": "TEAMS_URL"}),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[notify]\nroute = {}\n", "[notify] route: unknown key; did you mean 'routes'?"),
        ("[notify]\nroutes = 1\n", "[notify] routes: expected a table of routes"),
        ('[notify.routes.oncall]\nkind = "log"\n', "[notify.routes.oncall] notifier: missing"),
        ("[notify.routes.oncall]\nnotifier = 1\n", "[notify.routes.oncall] notifier: expected a"),
        ('[notify.routes."../x"]\nnotifier = "log"\n', "invalid route name '../x'"),
        (
            '[notify.routes]\noncall = "log"\n',
            "[notify.routes.oncall]: expected a table, got 'log'",
        ),
    ],
)
def test_a_bad_route_is_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = config_file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_notifier_names_the_distribution_to_install() -> None:
    config = parse_config(
        {
            "agent": {"name": "etl-01", "environment": "memory://x"},
            "notify": {"routes": {"oncall": {"notifier": "teams"}}},
        }
    )
    # the core alone, as before fdcore-teams is installed
    with pytest.raises(PluginError, match=r"notifier 'teams'.*install fdcore-teams"):
        open_routes(config, load_plugins(use_entry_points=False))


def test_options_a_notifier_refuses_name_the_file_and_route(tmp_path: Path) -> None:
    path = config_file(tmp_path, '[notify.routes.oncall]\nnotifier = "log"\nlevel = "error"\n')
    with pytest.raises(ConfigError) as info:
        open_routes(load_config(path), load_plugins())
    assert str(info.value) == (
        f"{path}: [notify.routes.oncall]: level: unknown option (the log notifier takes none)"
    )


def test_the_agent_refuses_to_start_with_a_route_it_cannot_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDCORE_DISABLE_PLUGINS", "fdcore-teams")  # as if not installed
    env = (tmp_path / "env").as_uri()
    path = tmp_path / "agent.toml"
    path.write_text(
        f'[agent]\nname = "a"\nenvironment = "{env}"\ncreate = true\n[runner]\ncommand = ["true"]\n'
        '[notify.routes.oncall]\nnotifier = "teams"\n'
    )
    assert main(["agent", "run", "--config", str(path)]) == 2
    assert "notifier 'teams'" in capsys.readouterr().err


def _no_tables(job: TableJob) -> TableRun:
    raise AssertionError("this test runs no table")


def test_a_sent_notification_reaches_its_route(caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config(
        {
            "agent": {"name": "etl-01", "environment": "memory://x"},
            "notify": {"routes": {"oncall": {"notifier": "log"}}},
        }
    )
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    parts = build_components(config, load_plugins(), storage, start_table=_no_tables)
    assert parts.notify.names == ["oncall"]
    with caplog.at_level(logging.WARNING, logger="fdcore.notify"):
        assert parts.notify.send(notification("oncall")) == Delivery("oncall", "log")
    assert "[oncall] incident inc-1 (error): Request r1 failed" in caplog.text


def test_a_failing_notifier_never_raises_and_says_why_once() -> None:
    config = parse_config(
        {
            "agent": {"name": "etl-01", "environment": "memory://x"},
            "notify": {"routes": {"teams": {"notifier": "refusing"}}},
        }
    )
    routes = open_routes(config, load_plugins(extra=[("acme", _RefusingPlugin())]))
    delivery = routes.send(notification("teams"))
    assert not delivery.delivered
    assert delivery == Delivery("teams", "refusing", "ConnectionError: 503 Service Unavailable")
    missing = routes.send(notification("pager"))
    assert missing == Delivery("pager", None, "no such route (routes: teams)")


def test_notify_test_sends_through_every_route(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = config_file(
        tmp_path,
        '[notify.routes.oncall]\nnotifier = "log"\n[notify.routes.audit]\nnotifier = "log"\n',
    )
    with caplog.at_level(logging.WARNING, logger="fdcore.notify"):
        assert main(["notify", "test", "--config", str(path)]) == 0
    assert capsys.readouterr().out == "OK oncall (log)\nOK audit (log)\n"
    sent = [r.getMessage() for r in caplog.records if r.name == "fdcore.notify"]
    assert len(sent) == 2
    assert "[oncall] incident test-" in sent[0]
    assert "fdcore test notification from agent etl-01" in sent[0]


def test_notify_test_route_picks_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config_file(
        tmp_path,
        '[notify.routes.oncall]\nnotifier = "log"\n[notify.routes.audit]\nnotifier = "log"\n',
    )
    assert main(["notify", "test", "--config", str(path), "--route", "audit"]) == 0
    assert capsys.readouterr().out == "OK audit (log)\n"
    assert main(["notify", "test", "--config", str(path), "--route", "pager"]) == 2
    assert capsys.readouterr().err == (
        f"fdcore: error: fdcore notify test: --route: no route 'pager' in {path} "
        "(routes: oncall, audit)\n"
    )


def test_notify_test_without_routes_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, "")
    assert main(["notify", "test", "--config", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"fdcore: error: {path}: [notify.routes]: no notification routes configured\n"
    )
