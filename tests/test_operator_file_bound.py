"""Every reader of a mailbox file honours the operator's ``max_file_bytes``, not the default: the
lease provider, the fenced table write, the schedules' look for a slot's request and the
objectives' run logs. A file over the bound (here 8 KiB, well under the default 1 MiB) is
reported, never read: a real local folder refuses it from its size before reading a byte."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage

from fdcore.abc import Blob, TableJob, TableRun
from fdcore.agent.components import build_components
from fdcore.agent.schedules import build_schedules, create_due_requests
from fdcore.builtin.leases import MailboxLeaseProvider
from fdcore.contract.layout import lease_key, request_key, run_key, status_key, table_key
from fdcore.contract.models import Outcome, RunRecord, State, Status
from fdcore.errors import MailboxFileError
from fdcore.incidents.objectives import look_at_objectives
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.fencing import fenced_write
from fdcore.plugins.manager import load_plugins
from fdcore.settings.agent_toml import AgentConfig, Objective, ScheduleConfig
from fdcore.table import fenced_write_from_env

BOUND = 8192
NOW = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)


class Folder(LocalFolderStorage):
    """A local folder that remembers the size of every mailbox file it handed out."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.served: list[int] = []

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        blob = super().read_bounded(key, max_bytes)
        if blob is not None:
            self.served.append(len(blob.data))
        return blob


def never_started(job: TableJob) -> TableRun:
    raise AssertionError(f"{job.table} started")


def pad(storage: Folder, key: str) -> None:
    """Make the file at ``key`` valid but 20 KB: over the operator's bound, under the default."""
    path = storage.root / key
    value = json.loads(path.read_bytes())
    value["padding"] = "x" * 20_000
    path.write_text(json.dumps(value))


def test_the_lease_provider_reads_within_the_operators_bound(tmp_path: Path) -> None:
    storage = Folder(tmp_path / "env")
    leases = MailboxLeaseProvider().open(storage, {"max_file_bytes": BOUND})
    assert leases.acquire("sales", "etl-01", "r1", 1, 60.0, NOW) is not None
    pad(storage, lease_key("sales"))
    with pytest.raises(MailboxFileError, match=r"leases/sales.json: is \d+ bytes, over the bound"):
        leases.current("sales")
    assert max(storage.served) < BOUND
    # The agent opens its provider with its own bound.
    config = AgentConfig(name="etl-01", environment=storage.url, max_file_bytes=BOUND)
    parts = build_components(config, load_plugins(), storage, start_table=never_started)
    with pytest.raises(MailboxFileError, match="over the bound"):
        parts.leases.current("sales")
    assert max(storage.served) < BOUND


def test_a_fenced_write_reads_the_output_within_the_agents_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Folder(tmp_path / "env")
    leases = MailboxLeaseProvider().open(storage, {"max_file_bytes": BOUND})
    held = leases.acquire("sales", "etl-01", "r1", 1, 60.0, NOW)
    assert held is not None
    token = held.lease.generation
    fenced_write(storage, leases, "sales", token, {"rows": 1}, BOUND)
    pad(storage, table_key("sales"))
    with pytest.raises(MailboxFileError, match=r"tables/sales.json: is \d+ bytes, over the bound"):
        fenced_write(storage, leases, "sales", token, {"rows": 2}, BOUND)
    # A table process gets the agent's bound from the runner, with the other variables.
    started: list[TableJob] = []

    def start(job: TableJob) -> TableRun:
        started.append(job)
        raise RuntimeError("recorded")

    config = AgentConfig(name="etl-01", environment=storage.url, max_file_bytes=BOUND)
    parts = build_components(config, load_plugins(), storage, start)
    with pytest.raises(RuntimeError, match="recorded"):
        parts.start_table(TableJob("r1", "sales", 1, token, "etl-01", storage.url))
    for name, value in started[0].environ().items():
        monkeypatch.setenv(name, value)
    assert started[0].environ()["FDCORE_MAX_FILE_BYTES"] == str(BOUND)
    with pytest.raises(MailboxFileError, match="over the bound"):
        fenced_write_from_env({"rows": 3}, storage=storage)
    assert max(storage.served) < BOUND


def test_a_slots_request_is_looked_for_within_the_operators_bound(tmp_path: Path) -> None:
    storage = Folder(tmp_path / "env")
    mailbox = Mailbox(storage, max_file_bytes=BOUND)
    hourly = ScheduleConfig(id="hourly", entities=("sales",), timing="every", spec="1h")
    config = AgentConfig(name="etl-01", environment=storage.url, schedules=(hourly,))
    [schedule] = build_schedules(config, load_plugins())
    slot = schedule.timetable.latest_due(NOW)
    assert slot is not None
    request_id = schedule.request_id(slot, "etl-01")
    path = storage.root / request_key(request_id)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"id": request_id, "padding": "x" * 20_000}))
    # Something is there (a file too big to be a request counts): no request made, none read.
    assert create_due_requests([schedule], mailbox, "etl-01", NOW) == []
    assert storage.served == []


def test_objectives_read_run_logs_within_the_operators_bound(tmp_path: Path) -> None:
    storage = Folder(tmp_path / "env")
    mailbox = Mailbox(storage, max_file_bytes=BOUND)
    at = NOW - timedelta(minutes=5)
    status = Status("r1", State.SUCCEEDED, at)
    mailbox.create(status_key("r1"), status)
    mailbox.create(
        run_key("r1", 1, "sales"),
        RunRecord("r1", "sales", "etl-01", 1, 1, at, at, Outcome.SUCCEEDED),
    )
    pad(storage, run_key("r1", 1, "sales"))
    objective = Objective(table="sales", freshness=3600.0)
    findings, judged, problems = look_at_objectives(mailbox, [status], [objective], NOW)
    assert (findings, judged) == ([], set())  # not judged from part of the run log
    assert len(problems) == 1 and "over the bound" in problems[0]
    assert storage.served == []
