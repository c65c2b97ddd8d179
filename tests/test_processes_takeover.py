"""Takeover with real agent processes and real signals (SIGKILL, SIGSTOP/SIGCONT)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import Outcome, State
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import (
    assert_each_table_succeeded_once,
    assert_no_double_writers,
    assert_taken_over,
    holder,
)
from fdcore.testing.tables import table_writes

pytestmark = pytest.mark.processes

POLL = 0.5
STALE = 2.0
GRACE = 1.0
AGENT = {"poll_seconds": POLL, "stale_after": STALE, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": GRACE, "lease_seconds": 2}
WRITER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
POISON = {"kind": "python", "function": "fdcore.testing.tables:poison_or_write"}
SLEEPER = {"kind": "python", "function": "fdcore.testing.tables:sleep_table"}
# Invariant 3: a lost agent's request is taken over within stale_after + grace + one poll of its
# last heartbeat (plus the time one poll itself takes on a loaded machine).
TAKEOVER_WITHIN = STALE + GRACE + POLL + 0.5


def start_three(fleet: AgentFleet, runner: dict[str, str], **sections: object) -> list[str]:
    names = ["etl-01", "etl-02", "etl-03"]
    for name in names:
        fleet.add(name, {"agent": AGENT, "pipeline": PIPELINE, "runner": runner, **sections})  # type: ignore[dict-item]
        fleet.agents[name].start()
    return names


@pytest.mark.slow
def test_sigkilled_agents_shared_run_is_taken_over_in_time(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
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
        assert_taken_over(mailbox, request_id, victim, within=TAKEOVER_WITHIN, timeout=20)
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
    assert_each_table_succeeded_once(mailbox, request_id)
    assert_no_double_writers(table_writes(fleet))


@pytest.mark.slow
def test_sigstopped_agent_wakes_up_and_writes_nothing_the_new_owner_holds(
    fdcore_fleet: AgentFleet,
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
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
        assert_taken_over(mailbox, "r1", sleeper.name, within=TAKEOVER_WITHIN, timeout=20)
        assert wait_until(
            lambda: mailbox.status("r1").value.state is State.SUCCEEDED,  # type: ignore[union-attr]
            20,
        )
        sleeper.signal(signal.SIGCONT)
        # It wakes up mid-table: its write is refused by the fencing check and it stops.
        assert wait_until(lambda: "no longer mine" in sleeper.output(), 20), sleeper.output()
        assert wait_until(lambda: any(w.agent == sleeper.name for w in table_writes(fleet)), 20)
        assert sleeper.alive()
    finally:
        fleet.stop_all()
    writes = [w for w in table_writes(fleet) if w.table == "sales"]
    sleepers = [w for w in writes if w.agent == sleeper.name]
    assert sleepers and all(w.rejected for w in sleepers), sleepers
    accepted = [w for w in writes if not w.rejected]
    assert len(accepted) == 1 and accepted[0].agent != sleeper.name
    assert {r.agent for r in mailbox.runs("r1")} == {accepted[0].agent}
    assert_no_double_writers(writes)


@pytest.mark.slow
def test_a_request_that_kills_every_agent_fails_after_max_attempts(
    fdcore_fleet: AgentFleet,
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    submit(mailbox, ["poison"], request_id="poison", max_attempts=3)
    names = start_three(fleet, POISON)

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
def test_mailbox_vanishing_for_a_while_loses_no_request(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    for n in range(30):
        submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.2"
    names = start_three(fleet, SLEEPER)
    root = tmp_path / "env"  # the fdcore_environment fixture's folder
    away = tmp_path / "env-away"
    try:
        assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 20)
        # Every agent up first: one starting while the folder is away would create a new one.
        assert wait_until(lambda: len(list(mailbox.agent_names())) == len(names), 20)
        os.rename(root, away)
        time.sleep(3)
        assert all(fleet.agents[name].alive() for name in names)
        os.rename(away, root)
        assert wait_until(
            lambda: all(row.state == "succeeded" for row in queue_rows(mailbox)), 60
        ), [(row.id, row.state, row.message) for row in queue_rows(mailbox) if row.message]
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}, "\n".join(fleet.agents[name].output() for name in names)
    assert len(queue_rows(mailbox)) == 30
    for name in names:
        output = fleet.agents[name].output()
        assert output.count("mailbox unavailable, will retry") >= 1, output
        assert "mailbox reachable again" in output


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


def _remount(mode: str, root: Path) -> None:
    # The kernel refuses a read-only remount ("mount point is busy") while any file on it is open
    # for writing, and the agents write all the time: try until one lands between two writes.
    deadline = time.monotonic() + 10
    while True:
        done = _mount("-o", f"remount,{mode},bind", str(root))
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert done.returncode == 0, f"mount -o remount,{mode},bind: {done.stderr.strip()}"


@pytest.mark.slow
def test_mailbox_turning_read_only_for_a_while_loses_no_request(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    root = tmp_path / "env"  # the fdcore_environment fixture's folder, made by opening the mailbox
    # As root a chmod does not stop writes; a read-only bind mount does.
    if _mount("--bind", str(root), str(root)).returncode != 0:
        pytest.skip("needs root to make a read-only bind mount")
    try:
        for n in range(30):
            submit(mailbox, ["a", "b"], request_id=f"r{n:02d}")
        fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.2"
        names = start_three(fleet, SLEEPER)
        try:
            assert wait_until(lambda: any(r.state == "succeeded" for r in queue_rows(mailbox)), 20)
            _remount("ro", root)
            time.sleep(3)
            assert all(fleet.agents[name].alive() for name in names)
            _remount("rw", root)
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
        # One spell, told once as it begins and once as it ends (not a pair every poll).
        assert output.count("mailbox unavailable, will retry") == 1, output
        assert "Read-only file system" in output
        assert output.count("mailbox reachable again") == 1, output


def _fill(root: Path) -> None:
    """Fill the small disk under ``root`` to the last byte (dd stops at "No space left")."""
    subprocess.run(["dd", "if=/dev/zero", f"of={root / '.filler'}", "bs=1M"], capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("spell", ["read-only", "full disk"])
def test_a_spell_of_failing_writes_is_told_once_as_it_begins_and_once_as_it_ends(
    fdcore_fleet: AgentFleet, tmp_path: Path, spell: str
) -> None:
    """Seen before: an idle agent logged "unavailable" and "reachable again" at every poll of
    a read-only or full-disk spell: a step that wrote nothing (reads still work) passed for the
    store's return."""
    root = tmp_path / "env"  # the fdcore_environment fixture's folder
    root.mkdir()
    # As root a chmod does not stop writes: a bind mount (read-only) of a small tmpfs (full).
    if _mount("-t", "tmpfs", "-o", "size=8m", "fdspell", str(root)).returncode != 0:
        pytest.skip("needs root to mount a small disk")
    try:
        assert _mount("--bind", str(root), str(root)).returncode == 0
        fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox  # the environment, on the small disk
        agent = fleet.add(
            "etl-01", {"agent": {"poll_seconds": 0.1, "stale_after": 2.0}, "runner": SLEEPER}
        )
        try:
            agent.start()
            assert wait_until(lambda: list(mailbox.agent_names()) == ["etl-01"], 20)
            _remount("ro", root) if spell == "read-only" else _fill(root)
            time.sleep(2.5)  # 25 polls; the record falls due every 0.5 s
            _remount("rw", root) if spell == "read-only" else (root / ".filler").unlink()
            assert wait_until(lambda: "reachable again" in agent.output(), 20), agent.output()
            time.sleep(0.5)
        finally:
            _mount("-o", "remount,rw,bind", str(root))
            codes = fleet.stop_all()
    finally:
        subprocess.run(["umount", str(root)], check=False)
        subprocess.run(["umount", str(root)], check=False)
    assert codes == {"etl-01": 0}
    output = agent.output()
    assert output.count("mailbox unavailable, will retry") == 1, output
    says = "Read-only file system" if spell == "read-only" else "No space left on device"
    assert says in output
    assert output.count("mailbox reachable again") == 1, output
