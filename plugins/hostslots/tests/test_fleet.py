"""Real agent processes on one host share its slots: never more tables at once than the host has
slots, through SIGKILLs of agents, and a killed agent's slot is free again after its lease time."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from fdcore_hostslots.host import Host

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.submit import submit

pytestmark = [pytest.mark.slow, pytest.mark.processes]

LOG_VARIABLE = "HOSTSLOTS_TEST_LOG"  # hostslot_tables.py's, imported by the agents only
LEASE = 2.0
AGENT = {"poll_seconds": 0.2, "stale_after": 2.0, "concurrency": 3, "shutdown_grace": 5}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 0.5, "lease_seconds": LEASE}
RUNNER = {"kind": "python", "function": "hostslot_tables:timed_table"}


def host_fleet(fleet: AgentFleet, tmp_path: Path, slots: int) -> Host:
    host = Host(tmp_path / "host")
    host.init()
    host.set_slots(slots)
    fleet.add_pythonpath(Path(__file__).parent)
    fleet.env[LOG_VARIABLE] = str(tmp_path / "runs")
    (tmp_path / "runs").mkdir()
    return host


def add_agent(fleet: AgentFleet, name: str, host: Host) -> None:
    agent = {**AGENT, "host": str(host.path)}
    fleet.add(name, {"agent": agent, "pipeline": PIPELINE, "runner": RUNNER}).start()


def spans(folder: Path, killed_at: dict[int, float]) -> list[tuple[float, float]]:
    """Each table run's (start, end) from the runs' own log; a run cut by a kill ends there."""
    starts: dict[tuple[int, str], float] = {}
    result = []
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            key = (entry["pid"], entry["request"])
            if entry["event"] == "start":
                starts[key] = entry["at"]
            else:
                result.append((starts.pop(key), entry["at"]))
    for (pid, _), start in starts.items():
        result.append((start, killed_at.get(pid, time.monotonic())))
    return result


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in events:  # an end sorts before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


def succeeded(fleet: AgentFleet) -> int:
    return sum(row.state == State.SUCCEEDED for row in queue_rows(fleet.mailbox))


def test_agents_never_run_more_tables_than_the_host_has_slots(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    fleet = fdcore_fleet
    host = host_fleet(fleet, tmp_path, slots=3)
    for index in range(200):
        submit(fleet.mailbox, [f"t{index}"])
    killed_at: dict[int, float] = {}

    def kill(name: str) -> None:
        agent = fleet.agents[name]
        pid = agent.pid
        agent.signal(signal.SIGKILL)
        killed_at[pid] = time.monotonic()
        agent.wait(10)

    add_agent(fleet, "a1", host)
    add_agent(fleet, "a2", host)  # two agents, 3 workers each, on a host of 3 slots
    assert wait_until(lambda: succeeded(fleet) >= 40, 120)
    kill("a1")
    add_agent(fleet, "a3", host)  # and then three
    assert wait_until(lambda: succeeded(fleet) >= 90, 120)
    add_agent(fleet, "a1", host)
    assert wait_until(lambda: succeeded(fleet) >= 140, 120)
    kill("a2")
    add_agent(fleet, "a2", host)
    assert wait_until(lambda: succeeded(fleet) == 200, 180), f"{succeeded(fleet)} of 200 done"
    fleet.stop_all()
    intervals = spans(tmp_path / "runs", killed_at)
    peak = most_at_once(intervals)
    print(f"table runs {len(intervals)}, agents SIGKILLed {len(killed_at)}, most at once {peak}")
    assert len(intervals) >= 200
    assert peak == 3  # all three slots used, never a fourth table
    assert host.slots().busy == 0


def test_a_killed_agents_slot_is_free_again_after_its_lease_time(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    fleet = fdcore_fleet
    host = host_fleet(fleet, tmp_path, slots=1)
    fleet.env["HOSTSLOTS_TEST_TABLE_SECONDS"] = "60"
    submit(fleet.mailbox, ["long"])
    add_agent(fleet, "a1", host)
    assert wait_until(lambda: host.slots().busy == 1, 30)
    [lease] = host.leases()
    assert lease.process.pid == fleet.agents["a1"].pid
    fleet.agents["a1"].kill()
    killed = time.monotonic()
    assert host.slots().busy == 1  # not recovered before its lease time
    assert wait_until(lambda: host.slots().busy == 0, LEASE + 5)
    assert time.monotonic() - killed >= LEASE - (time.time() - lease.renewed_at) - 0.5
