"""The audit trail over a scripted day with real processes: a submit from the command line and
one from Python with ``actor=``, a cancel from the monitor, a retry, a takeover after SIGKILL, a
retention run and a host's slot change make exactly one trusted event each, in ``fdcore audit
--json`` and on the monitor's request page."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from fdcore_monitor.actions import TOKEN_HEADER, Actions
from fdcore_monitor.app import Settings, create_app
from fdcore_monitor.snapshot import Source
from starlette.testclient import TestClient

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.environment import Environment
from fdcore.environment.actions import operator_name
from fdcore.testing.assertions import holder

POLL = 0.5
AGENT = {"poll_seconds": POLL, "stale_after": 2.0, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 1.0, "lease_seconds": 2}
SLEEPER = {"kind": "python", "function": "fdcore.testing.tables:sleep_table"}
TOKEN = "day-token"

pytestmark = pytest.mark.processes


def fdcore(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def final(environment: Environment, request: str) -> bool:
    found = environment.mailbox.status(request)
    return found is not None and found.value.state.final


@pytest.mark.slow
def test_a_scripted_day_is_one_trusted_event_per_action(fdcore_fleet: AgentFleet) -> None:
    fleet, url, me = fdcore_fleet, fdcore_fleet.environment, operator_name()
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "3"
    fdcore("init", url)
    fdcore("submit", "--env", url, "--entities", "a", "--id", "day-cli")
    environment = Environment.open(url)
    environment.submit(["b"], id="day-py", actor="svc-orchestrator")
    monitor = Environment.open(url, via="monitor")
    settings = Settings(
        source=Source(monitor), environment=url, actions=Actions(TOKEN, "alice"), bound_to="x"
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:
        answer = http.post("/actions/requests/day-cli/cancel", headers={TOKEN_HEADER: TOKEN})
        assert answer.status_code == 200, answer.text
        retry = fdcore("retry", "--env", url, "day-cli").strip()
        for name in ("etl-01", "etl-02"):
            fleet.add(name, {"agent": AGENT, "pipeline": PIPELINE, "runner": SLEEPER})
            fleet.agents[name].start()
        try:
            assert wait_until(lambda: holder(environment.mailbox, "day-py") is not None, 20)
            victim = holder(environment.mailbox, "day-py")
            assert victim is not None
            fleet.agents[victim].kill()
            assert wait_until(
                lambda: final(environment, "day-py") and final(environment, retry), 60
            )
        finally:
            fleet.stop_all()
        survivor = ({"etl-01", "etl-02"} - {victim}).pop()
        host = str(fleet.folder / "host")
        fdcore("host", "init", "--host", host)
        fdcore("host", "set-slots", "2", "--host", host, "--env", url)
        status = environment.mailbox.status("day-py")
        assert status is not None and status.value.state is State.SUCCEEDED
        time.sleep(1.1)  # older than --keep 1s
        fdcore("retention", "run", "--env", url, "--keep", "1s")
        events = [
            json.loads(line)
            for line in fdcore(
                "audit", "--env", url, "--json", "--since", "1h", "--archived"
            ).split("\n")
            if line
        ]
        page = http.get("/requests/day-py").text
    seen = sorted((e["action"], e["subject"], e["actor"], e["via"]) for e in events)
    assert seen == sorted(
        [
            ("submit", "day-cli", me, "cli"),
            ("submit", "day-py", "svc-orchestrator", "python"),
            ("cancel", "day-cli", "alice", "monitor"),
            ("retry", "day-cli", me, "cli"),
            ("takeover", "day-py", survivor, "agent"),
            ("archive", "day-cli", me, "cli"),
            ("archive", "day-py", me, "cli"),
            ("archive", retry, me, "cli"),
            ("set-slots", host, me, "cli"),
        ]
    )
    assert all(e["trusted"] for e in events), events
    [takeover] = [e for e in events if e["action"] == "takeover"]
    assert takeover["detail"].startswith(f"from {victim}")
    # the monitor's request page shows the request's actions, trusted
    assert page.count('class="trusted"') == 3 and "untrusted" not in page
    assert "svc-orchestrator" in page and survivor in page
    environment.close()
    monitor.close()
