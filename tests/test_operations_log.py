"""What a running agent says it cost: its store operations by kind since it started, logged
hourly and at its stop, with the dollars on a store that has a price table."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.config import load_config
from fdcore.cli.runtime import AgentRuntime, operations_line
from fdcore.mailbox.counting import CountingStore

AGENT = (
    '[agent]\nname = "etl-01"\nenvironment = "{env}"\ncreate = true\n[runner]\ncommand = ["true"]\n'
)


def test_an_agent_logs_its_store_operations_by_kind_at_its_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(AGENT.format(env=tmp_path / "env"))
    runtime = AgentRuntime(load_config(path))
    runtime.agent.poll()  # its first poll lists the folders
    runtime.request_stop()
    with caplog.at_level(logging.INFO, logger="fdcore.runtime"):
        assert runtime.run() == 0
    [line] = [r.getMessage() for r in caplog.records if "store operations" in r.getMessage()]
    counts = dict(part.rsplit(" ", 1) for part in line.split(": ", 2)[2].split(", "))
    assert int(counts["list"]) >= 2 and int(counts["create"]) >= 1  # its record, the signal
    assert "prices" not in line  # a local folder bills nothing


def test_on_a_priced_store_the_line_says_the_dollars_and_the_monthly_rate() -> None:
    store = CountingStore(MemoryStorage())
    store.create("a.json", b"{}")
    list(store.list(""))
    store.read("a.json")
    kinds = store.by_kind()
    assert kinds == {"create": 1, "list": 1, "read": 1}
    line = operations_line({"list": 1000}, 3600.0, "s3://bucket/env")
    assert line.startswith("store operations since start: read 0, list 1000, create 0")
    assert "at s3 prices $0.0050, about $3.60 a month at this rate" in line
