"""The template's own test: its entry point loads and the core finds its implementation."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import fdcore_plugin_template

from fdcore.abc import AgentLoad
from fdcore.plugins.manager import CLAIM, load_plugins

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
