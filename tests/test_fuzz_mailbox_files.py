"""Fuzz: arbitrary bytes, sizes and file kinds in every mailbox folder of a local-folder
environment, while an agent polls. No exception leaves a poll, the good request finishes, and
each bad file is reported at most once.

The agent is the real one, in this process, on a real folder (``fdcore-localfs``), with a manual
clock and table runs ended by the test (``fdcore.testing.memory_fleet``).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdcore.clock import ManualClock
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet

FOLDERS = ["requests", "status", "agents", "leases", "runs/good", "runs", "tables", "incidents"]
KINDS = ["bytes", "json", "fifo", "link-out", "link-in", "folder", "big"]
# The good request's own files, and this agent's own record (a folder there stops the agent
# on purpose: docs/agents.md, "Bad files").
KEPT = {"requests/good.json", "status/good.json", "leases/a.json", "agents/etl-01.json", "runs"}

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
JSONISH = st.sampled_from(
    [
        b"[" * 100_000,
        b'{"id": "x", "entities": ["a"], "created_at": "2027-01-15T02:00:00Z", "n": 1e999}',
        b'{"name": "x", "updated_at": "2027-01-15T02:00:00Z", "stale_after": 1e300}',
        b'{"request": "x", "state": "running", "agent": "z", "updated_at": "9999-12-31T23:59:59Z"}',
        b'{"id": "x", "entities": ["a"], "created_at": "2027-01-15T02:00:00Z", "u": "\\ud800"}',
        b'{"table": "a", "holder": "z", "request": "r", "attempt": 1, "generation": 1e30}',
        b"\xff\xfe\x00",
        b"",
    ]
)
stray = st.tuples(
    st.sampled_from(FOLDERS), names, st.sampled_from(KINDS), st.binary(max_size=300), JSONISH
)


def plant(root: Path, folder: str, name: str, kind: str, data: bytes, jsonish: bytes) -> str | None:
    key = f"{folder}/{name}"
    path = root / key
    if key in KEPT or any(key.startswith(k + "/") for k in KEPT if k != "runs") or path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "bytes":
        path.write_bytes(data)
    elif kind == "json":
        path.write_bytes(jsonish)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-out":
        path.symlink_to("/dev/zero")
    elif kind == "link-in":
        path.symlink_to(root / "requests" / "good.json")
    elif kind == "folder":
        path.mkdir()
    else:
        with open(path, "wb") as big:
            big.truncate(2 << 20)
    return key


@pytest.mark.usefixtures("fdcore_quiet_agents")
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(strays=st.lists(stray, min_size=1, max_size=8))
def test_no_file_of_any_kind_leaves_a_poll_or_loses_the_good_request(
    strays: list[tuple[str, str, str, bytes, bytes]],
) -> None:
    root = Path(tempfile.mkdtemp(prefix="fdcore-fuzz-"))
    try:
        storage = LocalFolderStorage(root / "env")
        fleet = MemoryFleet(storage, ManualClock(START))  # type: ignore[arg-type]
        submit(fleet.mailbox, ["a"], request_id="good", now=START)
        planted = [plant(root / "env", *one) for one in strays]
        agent = fleet.agent("etl-01", take_over=True)
        for _ in range(4):
            agent.poll()  # raises nothing: a bad file costs its own item only
            fleet.finish_runs()
            fleet.clock.advance(1)
        status = fleet.mailbox.status("good")
        assert status is not None and status.value.state is State.SUCCEEDED
        reports = Counter(
            key
            for key in filter(None, planted)
            for problem in agent.problems.reported
            if problem.startswith(f"{key}:") or problem.startswith(f"{key}/")
        )
        assert all(count <= 1 for count in reports.values()), agent.problems.reported
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_fuzz_covers_what_was_seen(caplog: pytest.LogCaptureFixture) -> None:
    """The cases of the issue, planted at once: each reported once, the good request done."""
    root = Path(tempfile.mkdtemp(prefix="fdcore-fuzz-"))
    try:
        storage = LocalFolderStorage(root / "env")
        fleet = MemoryFleet(storage, ManualClock(START))  # type: ignore[arg-type]
        submit(fleet.mailbox, ["a"], request_id="good", now=START)
        for kind in KINDS:
            plant(root / "env", "requests", f"{kind}.json", kind, b"\x00", b"[" * 100_000)
        agent = fleet.agent("etl-01")
        with caplog.at_level(logging.WARNING):
            for _ in range(4):
                agent.poll()
                fleet.finish_runs()
                fleet.clock.advance(1)
        assert fleet.mailbox.status("good").value.state is State.SUCCEEDED  # type: ignore[union-attr]
        reported = Counter(p.split(":")[0] for p in agent.problems.reported)
        # A folder under requests/ is no request file: a listing does not name it, nothing
        # reads it. Every other kind is reported once, over four polls.
        assert reported == {f"requests/{kind}.json": 1 for kind in KINDS if kind != "folder"}
    finally:
        shutil.rmtree(root, ignore_errors=True)
