"""Takeover with real agent processes and real signals (SIGKILL, SIGSTOP/SIGCONT)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from processes_helpers import double_writers, local_fleet, table_writes

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.cli.views import queue_rows
from fdcore.contract.models import Outcome, State
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit

POLL = 0.5
STALE = 2.0
GRACE = 1.0
AGENT = {"poll_seconds": POLL, "stale_after": STALE, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": GRACE, "lease_seconds": 2}
WRITER = {"kind": "python", "function": "fdcore_test_tables:write_table"}


def holder(mailbox: Mailbox, request_id: str) -> str | None:
    status = mailbox.status(request_id)
    if status is None or status.value.state is not State.RUNNING:
        return None
    return status.value.agent


def start_three(fleet: AgentFleet, runner: dict[str, str], **sections: object) -> list[str]:
    names = ["etl-01", "etl-02", "etl-03"]
    for name in names:
        fleet.add(name, {"agent": AGENT, "pipeline": PIPELINE, "runner": runner, **sections})  # type: ignore[dict-item]
        fleet.agents[name].start()
    return names


@pytest.mark.slow
def test_sigkilled_agents_shared_run_is_taken_over_in_time(tmp_path: Path) -> None:
    fleet, mailbox = local_fleet(tmp_path)
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "2.5"
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "3"
    # An hourly shared schedule: the agents coming up make the current slot's request at once.
    schedule = {"id": "hourly", "shared": True, "entities": ["sales", "stock"], "every": "1h"}
    start_three(fleet, WRITER, schedules=[schedule])
    try:
        assert wait_until(lambda: any(r.schedule for r in queue_rows(mailbox)), 20)
        [request_id] = [row.id for row in queue_rows(mailbox)]
        assert wait_until(lambda: holder(mailbox, request_id) is not None, 20)
        victim = holder(mailbox, request_id)
        assert victim is not None
        fleet.agents[victim].kill()
        last_seen = mailbox.agent(victim).value.updated_at  # type: ignore[union-attr]
        assert wait_until(lambda: holder(mailbox, request_id) not in (None, victim), 20)
        status = mailbox.status(request_id).value  # type: ignore[union-attr]
        taken_at = status.attempts[-1].started_at
        # Invariant 3: taken over within stale_after + grace + one poll of the victim's last
        # heartbeat (plus the time one poll itself takes on a loaded machine).
        assert (taken_at - last_seen).total_seconds() <= STALE + GRACE + POLL + 0.5
        assert wait_until(
            lambda: mailbox.status(request_id).value.state is State.SUCCEEDED,  # type: ignore[union-attr]
            40,
        )
    finally:
        fleet.stop_all()
    status = mailbox.status(request_id).value  # type: ignore[union-attr]
    assert [a.outcome for a in status.attempts] == [Outcome.LOST, Outcome.SUCCEEDED]
    assert status.attempts[0].agent == victim != status.attempts[1].agent
    runs = mailbox.runs(request_id)
    # The run log shows one attempt per agent: the victim recorded nothing it did not finish.
    assert {(r.attempt, r.agent) for r in runs} <= {(1, victim), (2, status.attempts[1].agent)}
    assert Counter(r.table for r in runs if r.outcome is Outcome.SUCCEEDED) == {
        "sales": 1,
        "stock": 1,
    }
    assert double_writers(table_writes(tmp_path)) == []


@pytest.mark.slow
def test_sigstopped_agent_wakes_up_and_writes_nothing_the_new_owner_holds(
    tmp_path: Path,
) -> None:
    fleet, mailbox = local_fleet(tmp_path)
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "2"
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "2"
    submit(mailbox, ["sales"], request_id="r1")
    start_three(fleet, WRITER)
    try:
        assert wait_until(lambda: holder(mailbox, "r1") is not None, 20)
        sleeper = fleet.agents[holder(mailbox, "r1")]  # type: ignore[index]
        assert wait_until(lambda: mailbox.storage.read("leases/sales.json") is not None, 10)
        sleeper.signal(signal.SIGSTOP)
        # Frozen past stale_after + grace + the lease: another agent takes it over and runs it.
        assert wait_until(lambda: holder(mailbox, "r1") not in (None, sleeper.name), 20)
        assert wait_until(
            lambda: mailbox.status("r1").value.state is State.SUCCEEDED,  # type: ignore[union-attr]
            20,
        )
        sleeper.signal(signal.SIGCONT)
        # It wakes up mid-table: its write is refused by the fencing check and it stops.
        assert wait_until(lambda: "no longer mine" in sleeper.output(), 20), sleeper.output()
        assert wait_until(
            lambda: any(w["agent"] == sleeper.name for w in table_writes(tmp_path)), 20
        )
        assert sleeper.alive()
    finally:
        fleet.stop_all()
    writes = [w for w in table_writes(tmp_path) if w["table"] == "sales"]
    sleepers = [w for w in writes if w["agent"] == sleeper.name]
    assert sleepers and all(w["rejected"] for w in sleepers), sleepers
    accepted = [w for w in writes if not w["rejected"]]
    assert len(accepted) == 1 and accepted[0]["agent"] != sleeper.name
    assert {r.agent for r in mailbox.runs("r1")} == {accepted[0]["agent"]}
    assert double_writers(writes) == []


@pytest.mark.slow
def test_a_request_that_kills_every_agent_fails_after_max_attempts(tmp_path: Path) -> None:
    fleet, mailbox = local_fleet(tmp_path)
    submit(mailbox, ["poison"], request_id="poison", max_attempts=3)
    names = start_three(fleet, {"kind": "python", "function": "fdcore_test_tables:poison_or_write"})

    def finished() -> bool:
        # A supervisor restarts what died, as systemd would; the poison must still stop.
        for name in names:
            agent = fleet.agents[name]
            if not agent.alive():
                agent.start()
        status = mailbox.status("poison")
        return status is not None and status.value.state is State.FAILED

    try:
        assert wait_until(finished, 60, interval=0.5)
        status = mailbox.status("poison").value  # type: ignore[union-attr]
        time.sleep(STALE + GRACE + 2 * POLL)
        assert mailbox.status("poison").value == status  # type: ignore[union-attr]
    finally:
        fleet.stop_all()
    lost = [a for a in status.attempts if a.outcome is Outcome.LOST]
    assert len(lost) == 3
    agents = list(dict.fromkeys(a.agent for a in status.attempts))
    assert status.message == f"failed after 3 lost attempts (agents: {', '.join(agents)})"


@pytest.mark.slow
def test_mailbox_vanishing_for_a_while_loses_no_request(tmp_path: Path) -> None:
    fleet, mailbox = local_fleet(tmp_path)
    for n in range(30):
        submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.2"
    names = start_three(fleet, {"kind": "python", "function": "fdcore_test_tables:sleep_table"})
    root = tmp_path / "env"
    away = tmp_path / "env-away"
    try:
        assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 20)
        os.rename(root, away)
        time.sleep(3)
        assert all(fleet.agents[name].alive() for name in names)
        os.rename(away, root)
        assert wait_until(
            lambda: all(row.state == "succeeded" for row in queue_rows(mailbox)), 60
        ), Counter(row.state for row in queue_rows(mailbox))
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}
    assert len(queue_rows(mailbox)) == 30
    for name in names:
        output = fleet.agents[name].output()
        assert output.count("mailbox unavailable, will retry") >= 1, output
        assert "mailbox reachable again" in output


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.mark.slow
def test_mailbox_turning_read_only_for_a_while_loses_no_request(tmp_path: Path) -> None:
    fleet, mailbox = local_fleet(tmp_path)
    root = tmp_path / "env"  # made by local_fleet's mailbox
    # As root a chmod does not stop writes; a read-only bind mount does.
    if not _mount("--bind", str(root), str(root)):
        pytest.skip("needs root to make a read-only bind mount")
    try:
        for n in range(30):
            submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
        fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.2"
        names = start_three(fleet, {"kind": "python", "function": "fdcore_test_tables:sleep_table"})
        try:
            assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 20)
            assert _mount("-o", "remount,ro,bind", str(root))
            time.sleep(3)
            assert all(fleet.agents[name].alive() for name in names)
            assert _mount("-o", "remount,rw,bind", str(root))
            assert wait_until(
                lambda: all(row.state == "succeeded" for row in queue_rows(mailbox)), 60
            ), Counter(row.state for row in queue_rows(mailbox))
        finally:
            _mount("-o", "remount,rw,bind", str(root))
            codes = fleet.stop_all()
    finally:
        subprocess.run(["umount", str(root)], check=False)
    assert set(codes.values()) == {0}
    assert len(queue_rows(mailbox)) == 30
    for name in names:
        output = fleet.agents[name].output()
        assert "mailbox unavailable, will retry" in output, output
        assert "Read-only file system" in output
        assert "mailbox reachable again" in output
