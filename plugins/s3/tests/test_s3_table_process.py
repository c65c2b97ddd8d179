"""A table process started by the ``command`` runner opens an S3 environment with its agent's
``[storage]`` options (the emulator's endpoint), as the agent does."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone

import pytest
from fdcore_s3.testing import S3Emulator

from fdcore.abc import TableJob, TableResult, TableRun
from fdcore.agent.components import build_components
from fdcore.builtin.leases import MailboxLeases
from fdcore.plugins.manager import RUNNER, load_plugins
from fdcore.settings.agent_toml import AgentConfig

pytestmark = pytest.mark.processes

NOW = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)
SCRIPT = "from fdcore.table import fenced_write_from_env as w; w({'by': 'table'})"


def test_a_command_table_writes_fenced_into_s3_with_the_agents_options(
    s3: S3Emulator, environment_url: str
) -> None:
    plugins = load_plugins()
    storage = plugins.open_storage(environment_url, s3.options, create=False)
    held = MailboxLeases(storage).acquire("sales", "etl-01", "r1", 1, 60.0, NOW)
    assert held is not None
    started: list[TableJob] = []

    def start(job: TableJob) -> TableRun:
        started.append(job)
        return plugins.get(RUNNER, "command").start(
            job, {"command": [sys.executable, "-c", SCRIPT]}
        )

    config = AgentConfig(name="etl-01", environment=environment_url, storage_options=s3.options)
    parts = build_components(config, plugins, storage, start)
    token = held.lease.generation
    run = parts.start_table(TableJob("r1", "sales", 1, token, "etl-01", environment_url))
    deadline = time.monotonic() + 30
    while (result := run.poll()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert result == TableResult(True), result
    assert started[0].environ()["FDCORE_STORAGE_OPTIONS"] == json.dumps(s3.options, sort_keys=True)
    blob = storage.read("tables/sales.json")
    assert blob is not None
    assert json.loads(blob.data) == {"fencing_token": token, "by": "table"}
