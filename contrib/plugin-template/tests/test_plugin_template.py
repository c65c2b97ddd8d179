"""The template's own tests: its entry point loads, the core finds its implementation, and an
agent uses it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import fdcore_plugin_template
import pytest

from fdcore.abc import AgentLoad
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import CLAIM, Plugins, load_plugins
from fdcore.testing.memory_fleet import START, MemoryFleet

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_entry_point_names_this_package() -> None:
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["fdcore"]
    assert [importlib.import_module(v) for v in entry_points.values()] == [fdcore_plugin_template]


def test_core_finds_the_implementation_by_name() -> None:
    plugins = load_plugins(extra=[("plugin-template", fdcore_plugin_template)])
    policy = plugins.get(CLAIM, "one_at_a_time")
    assert policy.may_claim(AgentLoad(concurrency=4, running=0, waiting=0))
    assert not policy.may_claim(AgentLoad(concurrency=4, running=1, waiting=0))


# fdcore's pytest plugin gives every test these fixtures (docs/plugins.md, "Testing a plugin").
@pytest.fixture
def fdcore_plugins() -> Plugins:
    """The agents of fdcore_memory_fleet find this plugin even where it is not installed."""
    return load_plugins(extra=[("plugin-template", fdcore_plugin_template)])


def test_an_agent_with_the_policy_holds_one_request_at_a_time(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    agent = fleet.agent("etl-01", claim="one_at_a_time", concurrency=4)
    for n in range(3):
        submit(fleet.mailbox, [f"table{n}"], request_id=f"r{n}", now=START)
    agent.poll()
    assert sorted(agent.held) == ["r0"]  # room for four, but it claims one at a time
    for _ in range(3):
        fleet.finish_runs()
        agent.poll()
    assert [run.job.request for run in fleet.runs] == ["r0", "r1", "r2"]
