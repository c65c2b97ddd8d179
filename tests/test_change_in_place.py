"""A mailbox file changed in place on a local folder, its size kept and its modification time
put back (a sync tool, a restore, an editor that keeps times), is seen as changed by every
reader that asks: a wait, a running agent's cancels, an agent's look for requests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage
from test_environment_api import PATIENCE, later

from fdcore import Environment
from fdcore.clock import ManualClock
from fdcore.contract.layout import cancel_key, request_key, status_key
from fdcore.contract.models import State
from fdcore.errors import RequestFailed
from fdcore.mailbox.access import Mailbox
from fdcore.testing.memory_fleet import START, MemoryFleet


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    LocalFolderStorage(tmp_path / "env", create=True)
    return tmp_path / "env"


@pytest.fixture
def fleet(folder: Path) -> MemoryFleet:
    return MemoryFleet(LocalFolderStorage(folder), ManualClock(START))  # type: ignore[arg-type]


def rewrite_in_place(path: Path, data: bytes) -> None:
    """Write ``data`` over ``path``'s content, its size the same, then put its times back."""
    before = os.stat(path)
    assert len(data) == before.st_size
    time.sleep(0.05)  # past the file system's clock tick
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


def replace_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (a new inode), as a writer that renames into place."""
    scratch = path.with_suffix(".tmp")
    scratch.write_bytes(data)
    os.replace(scratch, path)


def same_size(data: bytes, changed: dict[str, object]) -> bytes:
    """``data`` (a JSON object) with ``changed`` fields, padded to the same size."""
    document = {**json.loads(data), **changed}
    compact = json.dumps(document, separators=(",", ":")).encode()
    assert len(compact) <= len(data)
    return compact + b" " * (len(data) - len(compact))


def test_the_local_folders_change_check_sees_an_edit_that_kept_size_and_time(
    folder: Path,
) -> None:
    store = LocalFolderStorage(folder)
    store.create("status/a.json", b'{"state": "a"}')
    read = store.read("status/a.json")
    assert read is not None and store.unchanged("status/a.json", read.etag)
    rewrite_in_place(folder / "status/a.json", b'{"state": "A"}')
    assert not store.unchanged("status/a.json", read.etag)
    again = store.read("status/a.json")
    assert again is not None and store.unchanged("status/a.json", again.etag)
    [listed] = store.list_versions("status/")
    assert listed.etag == again.etag


def test_a_wait_sees_a_final_status_written_in_place(folder: Path, fleet: MemoryFleet) -> None:
    env = Environment(Mailbox(LocalFolderStorage(folder)), poll=0.05)
    env.submit(["sales"], id="r1")
    fleet.agent("etl-01").poll()  # claims r1: running
    path = folder / status_key("r1")
    running = path.read_bytes()
    # Read as running first; then the status is put in place as failed, times kept.
    later(0.3, lambda: rewrite_in_place(path, same_size(running, {"state": "failed"})))
    with pytest.raises(RequestFailed):
        env.wait("r1", timeout=PATIENCE)


def test_a_running_agent_reads_a_cancel_fixed_in_place(folder: Path, fleet: MemoryFleet) -> None:
    env = Environment(Mailbox(LocalFolderStorage(folder)), poll=0.05)
    env.submit(["sales"], id="r1")
    agent = fleet.agent("etl-01")
    agent.poll()
    assert [run.job.request for run in fleet.runs] == ["r1"]
    env.cancel("r1", by="ann")
    path = folder / cancel_key("r1")
    cancel = path.read_bytes()
    replace_file(path, cancel.replace(b'"r1"', b'"r9"'))  # not a cancel of r1: reported
    fleet.clock.advance(5)
    agent.poll()
    assert env.request("r1").state == "running"
    rewrite_in_place(path, cancel)  # fixed, its times as the bad one's
    fleet.clock.advance(5)
    agent.poll()
    assert fleet.runs[0].cancelled
    assert env.request("r1").state == "cancelled"


def test_a_request_fixed_in_place_is_claimed(folder: Path, fleet: MemoryFleet) -> None:
    env = Environment(Mailbox(LocalFolderStorage(folder)), poll=0.05)
    env.submit(["sales"], id="r2")
    path = folder / request_key("r2")
    request = path.read_bytes()
    replace_file(path, request.replace(b'"r2"', b'"r9"'))  # its id not its name's: reported
    agent = fleet.agent("etl-01")
    agent.poll()
    assert fleet.runs == []
    rewrite_in_place(path, request)
    fleet.clock.advance(5)
    agent.poll()
    assert [run.job.request for run in fleet.runs] == ["r2"]
    status = fleet.mailbox.status("r2")
    assert status is not None and status.value.state is State.RUNNING
