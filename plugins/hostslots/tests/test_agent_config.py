"""``[agent] host``: parsed from agent.toml, and the agent's components go through the host."""

from __future__ import annotations

from pathlib import Path

import pytest
from fdcore_hostslots.errors import LayoutUnknown
from fdcore_hostslots.host import Host

from fdcore.abc import AgentLoad, TableJob, TableRun
from fdcore.agent.components import build_components
from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.config import parse_config
from fdcore.errors import ConfigError, PluginError
from fdcore.plugins.manager import load_plugins
from fdcore.settings.agent_toml import AgentConfig
from fdcore.testing.memory_fleet import ManualRun

RUNNER = {"kind": "python", "function": "os:getcwd"}
MEMORY = MemoryStorage("memory://x")


def config(folder: object, **agent: object) -> AgentConfig:
    section = {"name": "a1", "environment": "memory://x", **agent}
    if folder is not None:
        section["host"] = folder if isinstance(folder, int) else str(folder)
    return parse_config({"agent": section, "pipeline": {"claim": "when_free"}, "runner": RUNNER})


def test_host_and_host_admission_are_read_from_agent_toml(tmp_path: Path) -> None:
    parsed = config(tmp_path, host_admission="lanes")
    assert (parsed.host, parsed.host_admission) == (str(tmp_path), "lanes")
    assert config(None).host is None
    with pytest.raises(ConfigError, match=r"\[agent\] host: expected a folder path"):
        config(3)


def test_without_a_host_the_components_are_unchanged(tmp_path: Path) -> None:
    parts = build_components(config(None), load_plugins(), MEMORY)
    assert parts.claim.name == "when_free"
    assert type(parts.claim).__name__ == "WhenFree"


def test_with_a_host_claims_see_its_free_slots_and_tables_wait_for_one(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.init()
    started: list[TableJob] = []

    def start(job: TableJob) -> TableRun:
        started.append(job)
        return ManualRun(job)

    parts = build_components(config(tmp_path, concurrency=4), load_plugins(), MEMORY, start)
    idle = AgentLoad(concurrency=4, running=0, waiting=0)
    assert parts.claim.name == "when_free" and parts.claim.may_claim(idle)
    first = parts.start_table(TableJob("r1", "t1", 1, 1, "a1", "memory://x"))
    assert first.poll() is None and len(started) == 1 and host.slots().busy == 1
    assert not parts.claim.may_claim(idle)  # the agent's workers are free, the host is not
    second = parts.start_table(TableJob("r2", "t2", 1, 1, "a1", "memory://x"))
    assert second.poll() is None and len(started) == 1  # waits for the slot
    first.cancel()
    assert second.poll() is None and len(started) == 2


def test_an_unusable_host_folder_or_admission_name_fails_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(LayoutUnknown, match="fdcore host init"):
        build_components(config(tmp_path), load_plugins(), MEMORY)
    with pytest.raises(PluginError, match="nosuch"):
        build_components(config(tmp_path, host_admission="nosuch"), load_plugins(), MEMORY)
