"""Plugin loading: listing, disabling, broken plugins, name clashes, missing implementations."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from plugin_distributions import fdcore_cli, install_distribution

from fdcore import hookimpl
from fdcore.abc import AgentLoad, ClaimPolicy, Command, Notifier, Storage, StorageBackend
from fdcore.builtin.memory import MemoryStorage
from fdcore.builtin.notifiers import LogNotifier
from fdcore.cli.main import build_parser
from fdcore.errors import EnvironmentNotFound, PluginError
from fdcore.plugins.manager import CLAIM, COMMAND, NOTIFIER, RUNNER, SLOT, STORAGE, load_plugins


def test_plugins_lists_our_distributions_with_versions() -> None:
    result = fdcore_cli("plugins", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    rows = {row["distribution"]: row for row in listed if row["distribution"] != "fdcore"}
    assert rows["fdcore-localfs"]["version"] == "0.1.0"
    assert rows["fdcore-localfs"]["provides"] == {"storage backend": ["file"]}
    assert rows["fdcore-claim"]["provides"] == {"claim policy": ["always", "when_free"]}
    core = {row["name"]: row for row in listed if row["distribution"] == "fdcore"}
    assert core["builtin"]["provides"]["lease provider"] == ["mailbox"]
    assert core["simulator"]["provides"] == {"command": ["simulate"]}
    assert rows["fdcore-monitor"]["provides"] == {"command": ["monitor"]}
    human = fdcore_cli("plugins").stdout
    assert "fdcore-localfs" in human and "storage backend: file" in human


def test_disabled_localfs_names_the_distribution(tmp_path: Path) -> None:
    env = {"FDCORE_DISABLE_PLUGINS": "fdcore-localfs"}
    listed = fdcore_cli("plugins", env=env).stdout
    assert "fdcore-localfs" not in listed
    result = fdcore_cli("queue", "--env", (tmp_path / "env").as_uri(), env=env)
    assert result.returncode == 2
    message = result.stderr.strip()
    assert message.startswith(
        "fdcore: error: no installed plugin provides a storage backend for "
        f"'{(tmp_path / 'env').as_uri()}' (--env; installed: memory"
    )
    assert message.endswith("); fdcore-localfs is disabled by FDCORE_DISABLE_PLUGINS")
    assert "\n" not in message


def test_disabling_by_entry_point_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FDCORE_DISABLE_PLUGINS", "claim, takeover")
    plugins = load_plugins()
    with pytest.raises(PluginError, match=r"claim policy 'when_free'.*install fdcore-claim"):
        plugins.get(CLAIM, "when_free")


def _broken_distribution(folder: Path, distribution: str, module: str) -> None:
    source = "raise RuntimeError('plugin exploded on import')\n"
    install_distribution(folder, distribution, module, source, version="9.9")


def test_plugin_that_fails_to_import_is_reported_with_its_distribution(tmp_path: Path) -> None:
    _broken_distribution(tmp_path, "acme-fdcore-s3", "acme_fdcore_s3")
    result = fdcore_cli("plugins", env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0
    line = next(line for line in result.stdout.splitlines() if "acme-fdcore-s3" in line)
    assert "FAILED TO LOAD: RuntimeError: plugin exploded on import" in line
    assert "Traceback" not in result.stdout + result.stderr


def test_broken_plugin_of_ours_is_named_in_the_missing_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_distribution(tmp_path, "fdcore-claim", "fdcore_claim_broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FDCORE_DISABLE_PLUGINS", "claim")  # the real one, by entry point name
    plugins = load_plugins()
    with pytest.raises(PluginError) as info:
        plugins.get(CLAIM, "when_free")
    assert "fdcore-claim is installed but failed to load: RuntimeError" in str(info.value)


class _Fifo:
    name = "always"

    def may_claim(self, load: AgentLoad) -> bool:
        return True


class _Clashing:
    @hookimpl
    def fdcore_claim_policies(self) -> Sequence[ClaimPolicy]:
        return [_Fifo()]


def test_a_name_provided_twice_is_an_error_naming_both() -> None:
    plugins = load_plugins(extra=[("acme", _Clashing())])  # loads: only the name is unusable
    clash = (
        "claim policy 'always' is provided by two plugins: claim (fdcore-claim) and acme; "
        "disable one with FDCORE_DISABLE_PLUGINS"
    )
    with pytest.raises(PluginError) as info:
        plugins.get(CLAIM, "always")
    assert str(info.value) == clash
    assert plugins.get(CLAIM, "when_free").name == "when_free"  # the rest is there
    assert set(plugins.implementations(CLAIM)) == {"when_free"}
    for name in ("claim", "acme"):
        assert next(i for i in plugins.infos if i.name == name).problems == [clash]


class _Typo:
    @hookimpl
    def fdcore_claim_policy(self) -> Sequence[ClaimPolicy]:
        return []


def test_a_hook_that_does_not_exist_is_refused_at_start() -> None:
    with pytest.raises(PluginError) as info:
        load_plugins(extra=[("typo", _Typo())])
    assert str(info.value) == (
        "plugin 'typo' is invalid: unknown hook 'fdcore_claim_policy' "
        "(did you mean 'fdcore_claim_policies'?)"
    )


def test_unknown_implementation_lists_what_is_installed() -> None:
    plugins = load_plugins()
    with pytest.raises(PluginError) as info:
        plugins.get(CLAIM, "fifo")
    assert str(info.value) == (
        "no installed plugin provides claim policy 'fifo' ([pipeline] claim; "
        "installed: always, when_free)"
    )
    core_alone = load_plugins(use_entry_points=False)  # fdcore-teams not installed
    with pytest.raises(PluginError, match=r"notifier 'teams'.*install fdcore-teams"):
        core_alone.get(NOTIFIER, "teams")


def test_builtins_are_always_there() -> None:
    plugins = load_plugins(use_entry_points=False)
    assert set(plugins.implementations(STORAGE)) == {"memory"}
    assert set(plugins.implementations(RUNNER)) == {"command", "python"}
    assert plugins.implementations(SLOT) == {}


class _Exploding:
    @hookimpl
    def fdcore_claim_policies(self) -> Sequence[ClaimPolicy]:
        raise RuntimeError("claim policies exploded")

    @hookimpl
    def fdcore_notifiers(self) -> Sequence[Notifier]:
        return [LogNotifier()]  # would clash with the built-in, but the plugin is failed first


class _Nameless:
    @hookimpl
    def fdcore_claim_policies(self) -> Sequence[ClaimPolicy]:
        return [object()]  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("plugin", "error"),
    [
        (_Exploding(), "RuntimeError: claim policies exploded"),
        (_Nameless(), "TypeError: fdcore_claim_policies returned <object object"),
    ],
)
def test_a_plugin_whose_hook_fails_is_recorded_not_raised(plugin: object, error: str) -> None:
    plugins = load_plugins(extra=[("acme", plugin)])
    info = next(info for info in plugins.infos if info.name == "acme")
    assert info.error is not None and info.error.startswith(error)
    assert info.provides == {}
    assert plugins.provider(NOTIFIER, "log") == "builtin (fdcore)"  # nothing of acme's is used
    assert plugins.manager.get_plugin("acme") is None  # and pm.hook no longer calls it
    assert set(plugins.implementations(CLAIM)) == {"always", "when_free"}


def test_each_implementation_is_attributed_to_its_plugin() -> None:
    plugins = load_plugins(extra=[("acme", _Greeter())])
    assert plugins.provider(CLAIM, "when_free") == "claim (fdcore-claim)"
    assert plugins.provider(COMMAND, "greet") == "acme"
    assert plugins.provider(COMMAND, "simulate") == "simulator (fdcore)"
    info = next(info for info in plugins.infos if info.name == "acme")
    assert info.provides == {"command": ["greet"]}


# -- fdcore_commands: subcommands from plugins --------------------------------------------------


class _Greet:
    name = "greet"
    help = "say hello"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--to", default="world")

    def run(self, args: argparse.Namespace) -> int:
        print(f"hello {args.to}")
        return 3  # the command's own exit code reaches the shell


class _Greeter:
    @hookimpl
    def fdcore_commands(self) -> Sequence[Command]:
        return [_Greet()]


def test_a_plugin_adds_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser(load_plugins(extra=[("acme", _Greeter())]))
    args = parser.parse_args(["greet", "--to", "fleet"])
    assert args.run(args) == 3
    assert capsys.readouterr().out == "hello fleet\n"
    assert "greet" in parser.format_help() and "say hello" in parser.format_help()


class _Queue(_Greet):
    name = "queue"


class _QueueTaker:
    @hookimpl
    def fdcore_commands(self) -> Sequence[Command]:
        return [_Queue()]


def test_a_plugin_command_may_not_take_a_name_of_fdcores() -> None:
    plugins = load_plugins(extra=[("acme", _QueueTaker())])
    assert plugins.provider(COMMAND, "queue") == "commands (fdcore)"  # fdcore's own stays
    acme = next(info for info in plugins.infos if info.name == "acme")
    assert acme.provides == {}
    assert acme.problems == [
        "command 'queue' is fdcore's own (commands (fdcore)): rename it, "
        "or disable the plugin with FDCORE_DISABLE_PLUGINS=acme"
    ]
    args = build_parser(plugins).parse_args(["queue", "--env", "memory://x"])
    assert args.run.__self__ is plugins.get(COMMAND, "queue")


def test_a_command_provided_twice_is_an_error_naming_both() -> None:
    plugins = load_plugins(extra=[("acme", _Greeter()), ("other", _Greeter())])
    parser = build_parser(plugins)  # the other commands work
    assert "greet" in parser.format_help()
    args = parser.parse_args(["greet", "--to", "fleet"])  # whatever its arguments
    with pytest.raises(PluginError) as info:
        args.run(args)
    assert str(info.value) == (
        "command 'greet' is provided by two plugins: acme and other; "
        "disable one with FDCORE_DISABLE_PLUGINS"
    )


def test_simulate_comes_from_the_simulator_entry_point() -> None:
    assert "simulate" in fdcore_cli("--help").stdout
    result = fdcore_cli("--help", env={"FDCORE_DISABLE_PLUGINS": "simulator"})
    assert result.returncode == 0 and "simulate" not in result.stdout


class _OldBackend:
    """A backend written before ``create``: its open takes (url, options) only."""

    name = "old"

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def accepts(self, url: str) -> bool:
        return url.startswith("old://")

    def open(self, url: str, options: dict[str, str]) -> Storage:
        self.calls.append(url)
        return MemoryStorage(url)


class _OldBackends:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def fdcore_storage_backends(self) -> Sequence[StorageBackend]:
        return [_OldBackend(self.calls)]


def test_a_backend_without_the_create_flag_is_opened_as_before() -> None:
    old = _OldBackends()
    plugins = load_plugins(extra=[("old", old)])
    plugins.open_storage("old://a")
    plugins.open_storage("old://b", create=False)
    assert old.calls == ["old://a", "old://b"]
    with pytest.raises(EnvironmentNotFound):  # and one that has it gets it
        plugins.open_storage(f"memory://{os.getpid()}-never-made", create=False)
