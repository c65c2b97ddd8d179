"""Broken plugins, installed as a user installs them, do not take the command line down.

Each test installs throwaway distributions (``plugin_distributions``) with real entry points
and runs the real ``fdcore`` command beside them: ``fdcore plugins`` always runs and says what is
wrong and how to fix it; other commands run unless they need what a broken plugin would
provide, and then fail with one line naming the plugin and its distribution.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from plugin_distributions import fdcore_cli, install_distribution

from fdcore.contract.layout import agent_key
from fdcore.contract.models import AgentRecord
from fdcore.errors import PluginError
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import CLAIM, load_plugins

MISSPELT = """
    from fdcore import hookimpl

    @hookimpl
    def fdcore_claim_policy():
        return []
"""
CLASHING = """
    from fdcore import hookimpl

    class WhenFree:
        name = "when_free"

        def may_claim(self, load):
            return True

    @hookimpl
    def fdcore_claim_policies():
        return [WhenFree()]
"""
FIFO = """
    from fdcore import hookimpl

    class Fifo:
        name = "fifo"

        def may_claim(self, load):
            return load.running + load.waiting == 0

    @hookimpl
    def fdcore_claim_policies():
        return [Fifo()]
"""


@pytest.fixture
def broken_site(tmp_path: Path) -> dict[str, str]:
    """A site folder with four broken plugins; the environment of a process that sees them."""
    site = tmp_path / "site"
    install_distribution(site, "acme-typo", "acme_typo", MISSPELT, entry_point="typo")
    install_distribution(site, "acme-clash", "acme_clash", CLASHING, entry_point="acme")
    install_distribution(site, "acme-taken", "acme_taken", FIFO, entry_point="commands")
    return install_distribution(
        site, "acme-exploding", "acme_exploding", "raise ImportError('no module named boto')"
    )


def fdcore(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return fdcore_cli(*args, env=env)


def test_fdcore_plugins_shows_each_broken_plugin_with_the_fix(broken_site: dict[str, str]) -> None:
    listed = fdcore(broken_site, "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["distribution"]: row for row in json.loads(listed.stdout)}
    assert rows["acme-typo"]["error"] == (
        "unknown hook 'fdcore_claim_policy' (did you mean 'fdcore_claim_policies'?)"
    )
    assert rows["acme-exploding"]["error"] == "ImportError: no module named boto"
    assert rows["acme-taken"]["error"] == (
        "entry point name 'commands' is taken by plugin commands (fdcore): rename one of the two"
    )
    clash = (
        "claim policy 'when_free' is provided by two plugins: acme (acme-clash) and "
        "claim (fdcore-claim); disable one with FDCORE_DISABLE_PLUGINS"
    )
    assert rows["acme-clash"]["problems"] == [clash]
    assert rows["fdcore-claim"]["problems"] == [clash]
    assert rows["fdcore-claim"]["provides"] == {"claim policy": ["always"]}
    assert rows["acme-clash"]["provides"] == {}

    human = fdcore(broken_site, "plugins")
    assert human.returncode == 0, human.stderr
    line = next(line for line in human.stdout.splitlines() if "acme-typo" in line)
    assert line.endswith(
        "FAILED TO LOAD: unknown hook 'fdcore_claim_policy' (did you mean "
        "'fdcore_claim_policies'?); fix it, or disable it with FDCORE_DISABLE_PLUGINS=acme-typo"
    )
    line = next(line for line in human.stdout.splitlines() if line.startswith("acme "))
    assert line.endswith(f"acme-clash        0.1      PROBLEM: {clash}")
    line = next(line for line in human.stdout.splitlines() if line.startswith("claim "))
    assert line.endswith(f"claim policy: always; PROBLEM: {clash}")
    assert human.stderr == ""


def test_commands_run_beside_broken_plugins(broken_site: dict[str, str], tmp_path: Path) -> None:
    url = (tmp_path / "env").as_uri()
    for command in (["init", url], ["queue", "--env", url]):
        result = fdcore(broken_site, *command)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""


def test_an_agent_needing_a_clashing_name_fails_naming_both(
    broken_site: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nname = "etl-01"\nenvironment = "{(tmp_path / "env").as_uri()}"\n'
        'create = true\n[pipeline]\nclaim = "when_free"\n[runner]\ncommand = ["true"]\n'
    )
    result = fdcore(broken_site, "agent", "run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"fdcore: error: {config}: claim policy 'when_free' is provided by two plugins: "
        "acme (acme-clash) and claim (fdcore-claim); disable one with FDCORE_DISABLE_PLUGINS"
    )


def test_extra_plugins_that_are_installed_give_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(tmp_path, "acme-fifo", "acme_fifo", FIFO, entry_point="fifo")
    monkeypatch.syspath_prepend(str(tmp_path))
    import acme_fifo  # type: ignore[import-not-found]

    assert load_plugins().get(CLAIM, "fifo").name == "fifo"  # installed, it loads
    with pytest.raises(PluginError) as info:
        load_plugins(extra=[("fifo", acme_fifo)])
    assert str(info.value) == (
        "load_plugins(extra=...): the name 'fifo' is taken by plugin fifo (acme-fifo): "
        "pass another name, or disable it with FDCORE_DISABLE_PLUGINS"
    )
    with pytest.raises(PluginError) as info:
        load_plugins(extra=[("mine", acme_fifo)])
    assert str(info.value) == (
        "load_plugins(extra=...): 'mine' is already loaded as plugin fifo (acme-fifo): "
        "leave it out, or disable the installed one with FDCORE_DISABLE_PLUGINS"
    )
    monkeypatch.setenv("FDCORE_DISABLE_PLUGINS", "acme-fifo")  # the fix the message gives
    assert load_plugins(extra=[("fifo", acme_fifo)]).get(CLAIM, "fifo").name == "fifo"


def test_read_only_commands_need_no_takeover_plugin(tmp_path: Path) -> None:
    env = {**os.environ, "FDCORE_DISABLE_PLUGINS": "fdcore-takeover"}
    url = (tmp_path / "env").as_uri()
    storage = load_plugins().open_storage(url, create=True)
    # An agent silent for an hour: lost by stale_record, were it installed.
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    record = AgentRecord(name="etl-01", updated_at=an_hour_ago, stale_after=60.0)
    Mailbox(storage).create(agent_key("etl-01"), record)
    storage.close()
    for command in ("queue", "agents", "schedules"):
        result = fdcore(env, command, "--env", url, "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["warnings"] == [
            "agents judged by 'stale_record' are never shown lost: no installed plugin provides "
            "takeover policy 'stale_record' ([pipeline] takeover_policy; installed: none); "
            "fdcore-takeover is disabled by FDCORE_DISABLE_PLUGINS"
        ]
    agents = json.loads(fdcore(env, "agents", "--env", url, "--json").stdout)["agents"]
    assert [row["state"] for row in agents] == ["stale"]


def test_a_command_needing_a_missing_plugin_fails_alone(tmp_path: Path) -> None:
    """The simulator's ``--claim`` takes an installed claim policy: without fdcore-claim,
    ``fdcore simulate`` fails in one line naming the flag, and every other command works."""
    env = {**os.environ, "FDCORE_DISABLE_PLUGINS": "fdcore-claim"}
    assert fdcore(env, "--help").returncode == 0
    assert fdcore(env, "simulate", "--help").returncode == 0
    result = fdcore(env, "simulate", "--seed", "3")
    assert result.returncode == 2
    assert result.stderr == (
        "fdcore: error: fdcore simulate: --claim: unknown claim policy 'when_free' "
        "(known: none installed)\n"
    )


def test_the_demo_stops_on_an_agent_that_died_at_start(tmp_path: Path) -> None:
    env = {**os.environ, "FDCORE_DISABLE_PLUGINS": "fdcore-claim"}
    result = fdcore(
        env, "demo", "--dir", str(tmp_path / "demo"), "--agents", "1", "--requests", "1"
    )
    assert result.returncode == 1
    config = tmp_path / "demo" / "agent-1.toml"  # the file the demo wrote for it
    assert result.stderr.splitlines()[-1] == (
        f"agent-1 exited with code 2: fdcore: error: {config}: no installed plugin provides "
        "claim policy 'when_free' ([pipeline] claim; installed: none); fdcore-claim is "
        "disabled by FDCORE_DISABLE_PLUGINS; stopping the demo"
    )
    assert "timed out" not in result.stderr
