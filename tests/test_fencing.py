"""Fenced table writes check the token with the environment's own lease provider."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from fdcore import hookimpl
from fdcore.abc import HeldLease, Storage, TableJob, TableLeases, TableResult, TableRun
from fdcore.agent.components import build_components
from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.models import Lease
from fdcore.errors import PluginError, StaleFencingToken
from fdcore.mailbox.fencing import fenced_write
from fdcore.plugins.manager import RUNNER, load_plugins
from fdcore.settings.agent_toml import AgentConfig
from fdcore.table import fenced_write_from_env

NOW = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)


class LedgerLeases:
    """Leases kept outside the mailbox (as a lease service would): none are in the storage."""

    def __init__(self, generations: dict[str, int]) -> None:
        self.generations = generations

    def acquire(self, *args: Any, **kwargs: Any) -> HeldLease | None:
        raise NotImplementedError("fencing only reads the current lease")

    def renew(self, held: HeldLease, ttl: float, now: datetime) -> HeldLease:
        raise NotImplementedError("fencing only reads the current lease")

    def release(self, held: HeldLease, now: datetime) -> None:
        raise NotImplementedError("fencing only reads the current lease")

    def current(self, table: str) -> Lease | None:
        generation = self.generations.get(table)
        if generation is None:
            return None
        return Lease(
            table=table,
            holder="etl-01",
            request="r1",
            attempt=1,
            acquired_at=NOW,
            expires_at=NOW,
            generation=generation,
        )


class LedgerProvider:
    name = "ledger"

    def __init__(self, leases: LedgerLeases) -> None:
        self.leases = leases

    def open(self, storage: Storage, options: dict[str, Any]) -> TableLeases:
        return self.leases


class LedgerPlugin:
    def __init__(self, leases: LedgerLeases) -> None:
        self.leases = leases

    @hookimpl
    def fdcore_lease_providers(self) -> Sequence[LedgerProvider]:
        return [LedgerProvider(self.leases)]


def written(storage: Storage, table: str) -> dict[str, Any]:
    blob = storage.read(f"tables/{table}.json")
    assert blob is not None
    loaded: dict[str, Any] = json.loads(blob.data)
    return loaded


def test_the_token_is_checked_with_the_leases_given() -> None:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    leases = LedgerLeases({"sales": 5})
    fenced_write(storage, leases, "sales", 5, {"rows": 10})
    assert written(storage, "sales") == {"fencing_token": 5, "rows": 10}
    # the mailbox has no lease file for the table: its own leases would refuse every token
    with pytest.raises(StaleFencingToken, match="lease generation None"):
        fenced_write(storage, MailboxLeases(storage), "sales", 5, {"rows": 11})


def test_an_old_token_is_rejected() -> None:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    leases = LedgerLeases({"sales": 6})
    with pytest.raises(StaleFencingToken, match="token 5 rejected \\(lease generation 6\\)"):
        fenced_write(storage, leases, "sales", 5, {"rows": 10})
    fenced_write(storage, leases, "sales", 6, {"rows": 12})
    leases.generations["sales"] = 4  # a lease store that went back cannot let an old write in
    with pytest.raises(StaleFencingToken, match="a write with token 6 landed"):
        fenced_write(storage, leases, "sales", 4, {"rows": 1})
    assert written(storage, "sales")["rows"] == 12


def _table_env(monkeypatch: pytest.MonkeyPatch, storage: Storage, leases: str | None) -> None:
    """The variables the command runner gives a table process; ``None``: no FDCORE_LEASES."""
    job = TableJob("r1", "sales", 1, 5, "etl-01", storage.url, leases=leases or "mailbox")
    for name, value in job.environ().items():
        monkeypatch.setenv(name, value)
    if leases is None:
        monkeypatch.delenv("FDCORE_LEASES")


def test_a_table_process_finds_the_configured_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    plugins = load_plugins(extra=[("acme", LedgerPlugin(LedgerLeases({"sales": 5})))])
    _table_env(monkeypatch, storage, "ledger")
    fenced_write_from_env({"rows": 3}, plugins=plugins)
    assert written(storage, "sales") == {"fencing_token": 5, "rows": 3}


def test_a_table_process_without_a_provider_name_uses_the_mailbox(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    plugins = load_plugins(extra=[("acme", LedgerPlugin(LedgerLeases({"sales": 5})))])
    _table_env(monkeypatch, storage, None)  # started by an agent from before FDCORE_LEASES
    with pytest.raises(StaleFencingToken, match="lease generation None"):
        fenced_write_from_env({"rows": 3}, plugins=plugins)


def test_an_unknown_provider_is_the_usual_plugin_error(monkeypatch: pytest.MonkeyPatch) -> None:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    _table_env(monkeypatch, storage, "zookeeper")
    with pytest.raises(
        PluginError, match="no installed plugin provides lease provider 'zookeeper'"
    ):
        fenced_write_from_env({"rows": 3})


def test_the_agent_hands_its_provider_name_to_every_table() -> None:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    plugins = load_plugins(extra=[("acme", LedgerPlugin(LedgerLeases({})))])
    started: list[TableJob] = []

    def start(job: TableJob) -> TableRun:
        started.append(job)
        raise RuntimeError("recorded")

    config = AgentConfig(name="etl-01", environment=storage.url, leases="ledger")
    parts = build_components(config, plugins, storage, start)
    assert isinstance(parts.leases, LedgerLeases)
    with pytest.raises(RuntimeError, match="recorded"):
        parts.start_table(TableJob("r1", "sales", 1, 5, "etl-01", storage.url))
    assert started[0].leases == "ledger"
    assert started[0].environ()["FDCORE_LEASES"] == "ledger"


def test_a_command_table_writes_fenced_through_the_mailbox_leases(tmp_path: Path) -> None:
    """End to end: the command runner's process finds storage and leases from its variables."""
    url = (tmp_path / "env").as_uri()
    storage = load_plugins().open_storage(url)
    held = MailboxLeases(storage).acquire("sales", "etl-01", "r1", 1, 60.0, NOW)
    assert held is not None
    job = TableJob("r1", "sales", 1, held.lease.generation, "etl-01", url, leases="mailbox")
    assert run_writer(job) == TableResult(True)
    assert written(storage, "sales") == {"fencing_token": held.lease.generation, "by": "table"}


def test_a_table_process_told_a_bound_out_of_range_fails_naming_it(tmp_path: Path) -> None:
    url = (tmp_path / "env").as_uri()
    storage = load_plugins().open_storage(url)
    held = MailboxLeases(storage).acquire("sales", "etl-01", "r1", 1, 60.0, NOW)
    assert held is not None
    job = TableJob("r1", "sales", 1, held.lease.generation, "etl-01", url, max_file_bytes=12)
    result = run_writer(job)
    assert result is not None and not result.succeeded
    assert result.output.splitlines()[-1] == (
        "fdcore.errors.ConfigError: environment variable FDCORE_MAX_FILE_BYTES: "
        "must be 4096..67108864 bytes, got 12"
    )
    assert storage.read("tables/sales.json") is None


def run_writer(job: TableJob) -> TableResult | None:
    """Run ``job`` as the command runner does, the process writing through the public helper."""
    script = "from fdcore.table import fenced_write_from_env as w; w({'by': 'table'})"
    run = (
        load_plugins()
        .get(RUNNER, "command")
        .start(job, {"command": [sys.executable, "-c", script]})
    )
    deadline = time.monotonic() + 30
    while (result := run.poll()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return result
