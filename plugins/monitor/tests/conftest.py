"""An environment with a known history, written file by file, for the monitor's tests."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

from fdcore.contract.layout import INCIDENTS, agent_key, run_key, status_key
from fdcore.contract.models import (
    AgentRecord,
    Attempt,
    Incident,
    IncidentDocument,
    Outcome,
    RunRecord,
    ScheduleRef,
    State,
    Status,
)
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins


class Monitor:
    """A running ``fdcore monitor`` on a free port, and the address it printed."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fdcore.cli", "monitor", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        self.lines: list[str] = []
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith("Prometheus metrics:"):
                break
        printed = "".join(self.lines)
        found = re.search(r"open (http://127\.0\.0\.1:\d+/)(?:\?token=(\S+))?", printed)
        assert found, printed
        self.url: str = found[1]
        self.token: str | None = found[2]

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=10) as answer:
            return str(answer.read().decode())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture(scope="module")
def monitor(shared_history: History) -> Iterator[Monitor]:
    """``fdcore monitor --allow-actions`` over ``shared_history``."""
    running = Monitor("--env", shared_history.url, "--allow-actions")
    yield running
    running.stop()


@pytest.fixture
def start_monitor() -> Iterator[Callable[..., Monitor]]:
    """Start ``fdcore monitor ARGS`` (stopped at the end of the test)."""
    started: list[Monitor] = []

    def start(*args: str) -> Monitor:
        started.append(Monitor(*args))
        return started[-1]

    yield start
    for running in started:
        running.stop()


@attrs.frozen
class History:
    url: str
    mailbox: Mailbox
    now: datetime
    # what the files say, counted by hand
    lost_attempts: int = 3
    takeovers: int = 2
    run_seconds: tuple[float, ...] = (1.5, 2.0, 5.0, 0.5)


def _status(request: str, state: State, now: datetime, *attempts: tuple[str, Outcome]) -> Status:
    made = [
        Attempt(
            number=n,
            agent=agent,
            started_at=now - timedelta(seconds=60 - 10 * n),
            ended_at=None if outcome is Outcome.RUNNING else now - timedelta(seconds=55 - 10 * n),
            outcome=outcome,
        )
        for n, (agent, outcome) in enumerate(attempts, start=1)
    ]
    return Status(
        request=request,
        state=state,
        updated_at=now,
        agent=made[-1].agent,
        attempt=len(made),
        attempts=made,
        message="failed after 2 lost attempts" if state is State.FAILED else None,
    )


def _run(
    request: str, table: str, agent: str, attempt: int, seconds: float, now: datetime
) -> RunRecord:
    start = now - timedelta(seconds=40)
    return RunRecord(
        request=request,
        table=table,
        agent=agent,
        attempt=attempt,
        generation=7,
        started_at=start,
        ended_at=start + timedelta(seconds=seconds),
        outcome=Outcome.FAILED if request == "bad1" else Outcome.SUCCEEDED,
    )


@pytest.fixture
def history(tmp_path: Path) -> History:
    return write_history(tmp_path)


@pytest.fixture(scope="module")
def shared_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """One history for the tests of a module that only read it."""
    return write_history(tmp_path_factory.mktemp("history"))


def write_history(tmp_path: Path) -> History:
    """Agents live, lost and stopped; requests waiting, running, succeeded (one after a takeover,
    one of a schedule) and failed after two lost attempts; four table runs; an open incident."""
    url = (tmp_path / "env").as_uri()
    mailbox = Mailbox(load_plugins().open_storage(url))
    now = datetime.now(timezone.utc)
    for name, seen, stopped in (
        ("etl-live", now, None),
        ("etl-lost", now - timedelta(hours=1), None),
        ("etl-stopped", now - timedelta(minutes=5), now - timedelta(minutes=5)),
    ):
        record = AgentRecord(
            name=name,
            updated_at=seen,
            stale_after=600 if name == "etl-live" else 5,  # live however slow the test
            version="0.1.0",
            host="box-1",
            concurrency=2,
            running=1 if name == "etl-live" else 0,
            requests=["run1"] if name == "etl-live" else [],
            stopped_at=stopped,
        )
        mailbox.create(agent_key(name), record)
    submit(mailbox, ["a"], request_id="w1", now=now - timedelta(seconds=30))
    submit(mailbox, ["a"], request_id="w2", now=now - timedelta(seconds=10))
    for request_id in ("run1", "ok1", "bad1", "sched1"):
        submit(mailbox, ["a", "b"], request_id=request_id, now=now - timedelta(seconds=60))
    scheduled = mailbox.request("sched1")
    assert scheduled is not None
    scheduled.value.schedule = ScheduleRef(id="nightly", slot="2026-11-30")
    mailbox.replace("requests/sched1.json", scheduled.value, scheduled.etag)
    statuses = [
        _status("run1", State.RUNNING, now, ("etl-live", Outcome.RUNNING)),
        _status(
            "ok1", State.SUCCEEDED, now, ("etl-lost", Outcome.LOST), ("etl-live", Outcome.SUCCEEDED)
        ),
        _status(
            "bad1", State.FAILED, now, ("etl-lost", Outcome.LOST), ("etl-stopped", Outcome.LOST)
        ),
        _status("sched1", State.SUCCEEDED, now, ("etl-live", Outcome.SUCCEEDED)),
    ]
    for status in statuses:
        mailbox.create(status_key(status.request), status)
    for run in (
        _run("run1", "a", "etl-live", 1, 1.5, now),
        _run("ok1", "a", "etl-lost", 1, 2.0, now),
        _run("ok1", "b", "etl-live", 2, 5.0, now),
        _run("bad1", "a", "etl-stopped", 2, 0.5, now),
    ):
        mailbox.create(run_key(run.request, run.attempt, run.table), run)
    incident = Incident(
        id="inc-0001",
        key="agent_offline:etl-lost",
        title="agent etl-lost is offline",
        opened_at=now - timedelta(minutes=50),
        opened_by="etl-live",
        kind="agent_offline",
        subject="etl-lost",
    )
    mailbox.create(INCIDENTS, IncidentDocument(open=[incident], last_number=1))
    return History(url, mailbox, now)
