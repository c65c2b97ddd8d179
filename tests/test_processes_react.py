"""Real agents: tables back to back, new requests seen at once, between polls.

Before agents reacted between polls, each table waited for a poll (5 s by default). The first
tests below poll every 10 minutes (``BETWEEN_POLLS``) and wait a minute at most: what they wait
for can only happen between polls, so they do not depend on the machine's speed (a bound of a
third of a poll failed once on a loaded machine). docs/benchmarks.md has the measured figures.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import pytest

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit
from fdcore.testing.tables import table_writes

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 5, "stale_after": 30, "concurrency": 1, "shutdown_grace": 20}
# The first poll at start, the next 10 minutes later (the heartbeat too): within WAIT, anything
# after the first poll happened between polls.
BETWEEN_POLLS = {**AGENT, "poll_seconds": 600, "stale_after": 2400}
WAIT = 60.0
RUNNER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


def succeeded(fleet: AgentFleet, request: str) -> bool:
    status = fleet.mailbox.status(request)
    return status is not None and status.value.state is State.SUCCEEDED


def test_a_request_of_three_tables_takes_less_than_one_poll(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    agent = fleet.add("etl-01", {"agent": BETWEEN_POLLS, "runner": RUNNER}).start()
    try:
        assert wait_until(lambda: fleet.mailbox.agent("etl-01") is not None, timeout=30)
        submit(fleet.mailbox, ["sales", "stock", "orders"], request_id="r1")
        assert wait_until(lambda: succeeded(fleet, "r1"), timeout=WAIT), agent.output()
    finally:
        assert fleet.stop_all() == {"etl-01": 0}
    assert [w.table for w in table_writes(fleet)] == ["sales", "stock", "orders"]


def test_a_freed_worker_takes_the_next_queued_request_at_once(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    for n in range(4):
        submit(fleet.mailbox, [f"table{n}"], request_id=f"r{n}")
    agent = fleet.add(
        "etl-01", {"agent": BETWEEN_POLLS, "pipeline": {"claim": "when_free"}, "runner": RUNNER}
    ).start()
    try:
        # One worker, four queued requests: one poll, then each end frees the worker.
        assert wait_until(lambda: all(succeeded(fleet, f"r{n}") for n in range(4)), WAIT), (
            agent.output()
        )
    finally:
        assert fleet.stop_all() == {"etl-01": 0}


def test_an_idle_agent_sees_a_submitted_request_at_once(fdcore_fleet: AgentFleet) -> None:
    fleet = fdcore_fleet
    agent = fleet.add("etl-01", {"agent": BETWEEN_POLLS, "runner": RUNNER}).start()
    try:
        # Its first poll found nothing; the next is 10 minutes away. The local folder tells it.
        assert wait_until(lambda: fleet.mailbox.agent("etl-01") is not None, timeout=30)
        submit(fleet.mailbox, ["sales"], request_id="r1")
        assert wait_until(lambda: succeeded(fleet, "r1"), timeout=WAIT), agent.output()
    finally:
        assert fleet.stop_all() == {"etl-01": 0}


def test_a_request_waiting_for_a_lease_starts_when_the_holder_frees_it(
    fdcore_fleet: AgentFleet,
) -> None:
    # Polls 20 s apart: each wait for "x" and "y" ended only at a poll before. The holder frees
    # "x" by releasing it (a lease write) and "y" by finishing its request (a status write);
    # the local folder tells the waiting agent of both.
    fleet = fdcore_fleet
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "0.5"
    agent = {**AGENT, "poll_seconds": 20, "stale_after": 60}
    for name in ("etl-01", "etl-02"):
        fleet.add(name, {"agent": agent, "pipeline": {"claim": "when_free"}, "runner": RUNNER})
    try:
        for process in fleet:
            process.start()
        assert wait_until(lambda: len(list(fleet.mailbox.agent_names())) == 2, timeout=30)
        submit(fleet.mailbox, ["x", "y"], request_id="r1")
        submit(fleet.mailbox, ["x", "y"], request_id="r2")
        done = wait_until(lambda: succeeded(fleet, "r1") and succeeded(fleet, "r2"), timeout=10)
        assert done, [process.output() for process in fleet]
    finally:
        assert fleet.stop_all() == {"etl-01": 0, "etl-02": 0}
    holders = {w.request: w.agent for w in table_writes(fleet)}
    assert len(set(holders.values())) == 2  # one request each: one of them waited, twice


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts wake-ups in /proc")
def test_an_idle_agent_sleeps(fdcore_fleet: AgentFleet) -> None:
    # Its threads' context switches, counted by the kernel: each is a wake-up. Idle, an agent
    # wakes for its poll (every 5 s) and each watch once a second to see whether to stop; the
    # inotify watch of watchfiles woke every 5 ms (about 600 in these 3 s).
    fleet = fdcore_fleet
    process = fleet.add("etl-01", {"agent": AGENT, "runner": RUNNER}).start()
    try:
        assert wait_until(lambda: fleet.mailbox.agent("etl-01") is not None, timeout=30)
        time.sleep(1)  # start-up done
        before = context_switches(process.pid)
        time.sleep(3)
        woken = context_switches(process.pid) - before
        assert woken < 100, woken
    finally:
        assert fleet.stop_all() == {"etl-01": 0}


def context_switches(pid: int) -> int:
    """Every thread's voluntary and involuntary context switches so far (Linux /proc)."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            for line in status.read_text().splitlines():
                if "ctxt_switches:" in line:
                    total += int(line.split()[-1])
    return total
