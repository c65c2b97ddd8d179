"""Stray files of every kind in a mailbox while real agents run: none stops or hangs an agent.

Each was seen to stop or hang every agent of an environment (and ``fdcore queue``): a FIFO where
a request belongs (agents blocked forever, deaf to SIGTERM), a link to ``/dev/zero``
(MemoryError), 50 MB of JSON (re-read every poll), 100,000 nested ``[``, a folder where a status
or a lease belongs, a file where a request's ``runs/`` folder belongs, an agent record with
``"stale_after": 1e300``, a folder where an agent's own record belongs (that agent stopped;
later, woken between polls by a submission, it claimed the request and held it unstarted).
Good requests must all finish, every bad file is reported once per agent, and ``fdcore queue``
shows the stuck request ``unreadable`` with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.2, "stale_after": 3.0, "concurrency": 2, "shutdown_grace": 10}
PIPELINE = {"take_over": True, "grace_seconds": 1.0}
SLEEPER = {"kind": "python", "function": "fdcore.testing.tables:sleep_table"}
GOOD = [f"good-{n}" for n in range(6)]
LATE = "late"  # submitted once the agent that cannot write its record watches requests/


def inotify_watches(agent: AgentProcess) -> int:
    """How many inotify watches the agent's process has armed (Linux: /proc/<pid>/fdinfo)."""
    assert agent.process is not None
    count = 0
    for info in Path(f"/proc/{agent.process.pid}/fdinfo").glob("*"):
        with contextlib.suppress(OSError):  # a descriptor closed meanwhile
            count += info.read_text().count("inotify wd:")
    return count


def plant_bad_files(root: Path) -> dict[str, str]:
    """Bad files by key, with what the report about each must say."""
    for folder in ("requests", "status", "agents", "leases", "runs"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / "requests/fifo.json")
    (root / "requests/zero.json").symlink_to("/dev/zero")
    with open(root / "requests/big.json", "wb") as big:
        big.truncate(50 << 20)  # 50 MB on paper, nothing on disk: it must not be read
    (root / "requests/deep.json").write_bytes(b"[" * 100_000)
    (root / "status/stuck.json").mkdir()
    (root / "leases/c.json").mkdir()
    (root / "runs/good-0").write_text("a file where a folder belongs")
    (root / "agents/ghost.json").write_text(
        json.dumps({"name": "ghost", "updated_at": "2026-01-01T00:00:00Z", "stale_after": 1e300})
    )
    return {
        "requests/fifo.json": "is a FIFO",
        "requests/zero.json": "symbolic link",
        "requests/big.json": "over the bound",
        "requests/deep.json": "",
        "status/stuck.json": "is a folder",
        "leases/c.json": "is a folder",
        "agents/ghost.json": "stale_after",
        "runs/good-0/001-a.json": "",
    }


@pytest.mark.slow
def test_no_stray_file_stops_an_agent(fdcore_fleet: AgentFleet, tmp_path: Path) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    root = tmp_path / "env"  # the fdcore_environment fixture's folder
    for request_id in GOOD:
        submit(mailbox, ["a", "b"], request_id=request_id)
    submit(mailbox, ["a"], request_id="stuck")  # its status path is a folder
    submit(mailbox, ["c"], request_id="needs-c")  # its table's lease path is a folder
    bad = plant_bad_files(root)
    names = ["etl-01", "etl-02"]
    # An agent whose own record path is a folder cannot say it is alive: it runs on, takes
    # nothing, and reports the folder once.
    (root / "agents/etl-03.json").mkdir()
    unseen = fleet.add("etl-03", {"agent": AGENT, "pipeline": PIPELINE, "runner": SLEEPER})
    try:
        unseen.start()
        # Alone, once it polled and its watch of requests/ is armed, a submission wakes it
        # between polls (Agent.react): it must take nothing there either, or the request waits
        # for good (it takes no table lease before a record write measured its clock, and an
        # agent without a readable record is never judged lost).
        assert wait_until(lambda: "agents/etl-03.json: is a folder" in unseen.output(), 20)
        assert wait_until(lambda: inotify_watches(unseen) >= 3, 20)  # requests, leases, status
        submit(mailbox, ["a"], request_id=LATE)
        for name in names:
            fleet.add(name, {"agent": AGENT, "pipeline": PIPELINE, "runner": SLEEPER}).start()
        assert wait_until(
            lambda: all(
                (found := mailbox.status(r)) is not None and found.value.state is State.SUCCEEDED
                for r in [*GOOD, LATE]
            ),
            60,
        ), [fleet.agents[n].output()[-3000:] for n in names]
        assert all(fleet.agents[name].alive() for name in [*names, "etl-03"])
        queue = subprocess.run(
            [sys.executable, "-m", "fdcore.cli", "queue", "--env", fleet.environment, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert queue.returncode == 0, queue.stderr
        rows = {row["id"]: row for row in json.loads(queue.stdout)["requests"]}
        assert rows["stuck"]["state"] == "unreadable"
        assert "status/stuck.json: is a folder" in rows["stuck"]["message"]
        assert rows["needs-c"]["state"] == "running"  # waits for its lease, which is reported
        agents = subprocess.run(
            [sys.executable, "-m", "fdcore.cli", "agents", "--env", fleet.environment, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert agents.returncode == 0, agents.stderr
        states = {row["name"]: row["state"] for row in json.loads(agents.stdout)["agents"]}
        assert states == {"etl-01": "live", "etl-02": "live", "ghost": "unreadable"}
    finally:
        codes = fleet.stop_all()
    assert codes == {name: 0 for name in [*names, "etl-03"]}  # SIGTERM heard, clean exit
    assert not [r for r in [*GOOD, LATE] if mailbox.status(r).value.attempts[0].agent == "etl-03"]  # type: ignore[union-attr]
    blocked = fleet.agents["etl-03"].output()
    assert "Traceback" not in blocked
    assert blocked.count("skipping agents/etl-03.json: is a folder") == 1, blocked[-2000:]
    for name in names:
        output = fleet.agents[name].output()
        assert "Traceback" not in output
        for key, says in bad.items():
            reports = [line for line in output.splitlines() if f"skipping {key}" in line]
            # Every agent lists requests/ and status/; the other files only the agent that
            # meets them reads (the lease's and run's, the holder; a record, a takeover).
            if key.startswith(("requests/", "status/")) or reports:
                assert len(reports) == 1, (name, key, reports)
                assert says in reports[0], reports[0]
