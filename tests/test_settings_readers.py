"""Every key and default is written once: the declaration of agent.toml, and every other reader
of the same value (the agent's settings, the commands' flags, the simulator's scenario,
``Environment.submit``, the table process's and the operator's variables) takes its check and
default from it."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from test_flag_values import check_of as check_of_flag
from test_flag_values import walk

from fdcore.cli.config import parse_config
from fdcore.cli.main import build_parser
from fdcore.environment import Environment
from fdcore.errors import ConfigError
from fdcore.settings.agent_toml import (
    AgentConfig,
    AgentTable,
    AgentToml,
    PipelineTable,
    RunnerTable,
    read_paths,
)
from fdcore.settings.declare import check_of, default_of, tables
from fdcore.settings.table_process import TableVariables, variables
from fdcore.settings.variables import FILE_BOUND_VARIABLE, operator_file_bound
from fdcore.simulator.scenario import Scenario

#: The tables AgentConfig reads key by key (the others it takes whole, or as schedules/routes).
FLAT = ("agent", "storage", "pipeline", "runner")
#: The runner's own options: handed to the runner plugin as they are (``runner_options``).
RUNNER_OPTIONS = {"command", "function", "cwd"}


def test_every_key_of_the_flat_tables_is_read_into_the_agents_settings_exactly_once() -> None:
    declared = tables(AgentToml)
    keys = {(table, key) for table in FLAT for key in declared[f"[{table}]"]}
    keys |= {("storage", "options")}  # [storage]'s other keys, the backend's options
    read = read_paths()
    assert len(read) == len(set(read)), "a key read into two fields"
    flat = {path for path in read if len(path) == 2}
    assert flat == keys - {("runner", key) for key in RUNNER_OPTIONS}
    assert set(attrs.fields_dict(RunnerTable)) - {"kind", "run_as"} == RUNNER_OPTIONS
    whole = {path[0] for path in read if len(path) == 1}
    assert whole == {"incidents", "retention"}


def test_the_agents_settings_take_the_declared_defaults_and_values() -> None:
    config = parse_config(
        {
            "agent": {"name": "a", "environment": "file:///srv", "concurrency": 4},
            "runner": {"kind": "python", "function": "m:f", "run_as": "etl"},
            "storage": {"backend": "file", "region": "x"},
        }
    )
    assert (config.concurrency, config.runner, config.run_as) == (4, "python", "etl")
    assert config.runner_options == {"function": "m:f"}
    assert (config.storage_backend, dict(config.storage_options)) == ("file", {"region": "x"})
    by_hand = AgentConfig(name="a", environment="file:///srv")
    assert by_hand.poll_seconds == default_of(AgentTable, "poll_seconds") == 5.0
    assert by_hand.grace_seconds == default_of(PipelineTable, "grace_seconds")


#: Every flag of a command that sets an agent.toml key's value for one command.
FLAGS = {
    ("queue", "--grace"): (PipelineTable, "grace_seconds"),
    ("agents", "--grace"): (PipelineTable, "grace_seconds"),
    ("incidents", "evaluate", "--grace"): (PipelineTable, "grace_seconds"),
    ("retention", "run", "--grace"): (PipelineTable, "grace_seconds"),
    ("submit", "--max-attempts"): (PipelineTable, "max_attempts"),
}


def test_a_flag_of_a_declared_key_takes_its_check_and_default() -> None:
    found = {(*flag.command, flag.name): flag for flag in walk(build_parser())}
    for where, (table, key) in FLAGS.items():
        flag = found[where]
        assert check_of_flag(flag) == check_of(table, key), where
        if flag.action.default is not None:
            assert flag.action.default == default_of(table, key), where


#: The scenario's fields that are an agent's settings, with the same check and default.
SCENARIO = {
    "poll_seconds": (AgentTable, "poll_seconds"),
    "stale_after": (AgentTable, "stale_after"),
    "grace_seconds": (PipelineTable, "grace_seconds"),
    "max_attempts": (PipelineTable, "max_attempts"),
}


@pytest.mark.parametrize("name", sorted(SCENARIO))
def test_the_scenarios_agent_settings_are_the_declared_ones(name: str) -> None:
    table, key = SCENARIO[name]
    field = attrs.fields_dict(Scenario)[name]
    assert field.default == default_of(table, key)
    assert check_of(Scenario, name) == check_of(table, key)


def test_the_scenarios_workers_are_checked_as_an_agents() -> None:
    assert check_of(Scenario, "concurrency") == check_of(AgentTable, "concurrency")


def test_the_file_bound_is_one_check_and_one_default_everywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declared = check_of(AgentTable, "max_file_bytes")
    assert variables()["max_file_bytes"].check == declared  # a table process's variable
    assert variables()["max_file_bytes"].name == FILE_BOUND_VARIABLE
    monkeypatch.delenv(FILE_BOUND_VARIABLE, raising=False)
    unset = attrs.fields_dict(TableVariables)["max_file_bytes"].default
    assert operator_file_bound() == unset == AgentConfig(name="a", environment="e").max_file_bytes
    monkeypatch.setenv(FILE_BOUND_VARIABLE, "8192")  # the operator's bound: agents without a key
    config = parse_config({"agent": {"name": "a", "environment": "file:///srv"}})
    assert config.max_file_bytes == 8192
    assert AgentConfig(name="a", environment="e").max_file_bytes == 8192
    monkeypatch.setenv(FILE_BOUND_VARIABLE, "10")
    with pytest.raises(ConfigError, match=f"^environment variable {FILE_BOUND_VARIABLE}: must be"):
        parse_config({"agent": {"name": "a", "environment": "file:///srv"}})


def test_submit_in_code_takes_the_declared_attempts(tmp_path: Path) -> None:
    most = check_of(PipelineTable, "max_attempts")
    with Environment.open(str(tmp_path / "env"), create=True) as environment:
        with pytest.raises(ConfigError, match=r"^Environment.submit: max_attempts: must be 1\.\."):
            environment.submit(["sales"], max_attempts=most.high + 1)  # type: ignore[attr-defined]
        assert environment.submit(["sales"], max_attempts=most.high).id  # type: ignore[attr-defined]
