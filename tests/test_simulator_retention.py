"""A retention process beside the simulated fleet (``--retention-runs``): ``fdcore retention
run``'s code, its store calls landing between the agents', and invariant 13 judging it.

Seed 1 of ``RACE`` reproduced issue 24 item 1 on the code before the fix: a request
that had succeeded was claimed again by the agent that ran it, in attempt 1, both its tables
ran again, and the next run replaced its archived status and run records. The test puts the old
claim path back (its listing order, a claim without confirmation, an archive copy that replaces)
and shows the checker catching exactly that, and that the same seed holds as the code is. Where
the agents' store operations change, the retention process's calls land elsewhere: since an
idle poll reads the change signal instead of listing, seed 13 reproduced it (seed 1 no longer
did); since the audit trail's writes (a takeover, an expiry, each retention move), seed 4;
since a full agent's poll lists nothing, seed 5; since a table's ownership check reads no
status the agent's own write confirmed moments before, seed 10.
"""

from __future__ import annotations

import attrs
import pytest

from fdcore.agent.discovery import Discovery
from fdcore.cli.main import main
from fdcore.contract.layout import status_key
from fdcore.contract.models import Status
from fdcore.errors import AlreadyExists
from fdcore.mailbox import archive
from fdcore.mailbox.access import Mailbox
from fdcore.simulator import Scenario, simulate
from fdcore.simulator.options import command_line

# The agents log every claim.
pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")

RACE = Scenario(seed=1, requests=100, take_over=True, retention_runs=2.0)
# A seed whose run meets each of the three old paths (it moves when the agents' timings do).
CAUGHT = attrs.evolve(RACE, seed=10)


def test_a_retention_process_racing_the_fleet_runs_no_request_twice() -> None:
    report = simulate(RACE)
    assert report.violations == []
    assert report.requests == {"succeeded": 100}
    checks = report.checks
    assert checks["retention runs"] > 100 and checks["retention runs killed"] > 10
    assert checks["requests moved by retention runs"] > 50
    assert checks["requests archived"] == 100 - 1  # the last one finished under a second ago


def _old_listings(self: Discovery) -> tuple[set[str], set[str]]:
    requests = set(self.index.requests.list())
    return set(self.index.statuses.list()), requests


def _old_create_status(mailbox: Mailbox, status: Status) -> str:
    return mailbox.create(status_key(status.request), status)


def _old_copy(mailbox: Mailbox, key: str, data: bytes) -> None:
    try:
        mailbox.storage.create(key, data)
    except AlreadyExists:
        existing = mailbox.read_file(key)
        if existing is not None and existing.data != data:
            mailbox.storage.replace(key, data, existing.etag)


def test_invariant_13_catches_the_claim_path_before_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert simulate(CAUGHT).violations == []  # the same seed, as the code is
    monkeypatch.setattr(Discovery, "_listings", _old_listings)
    monkeypatch.setattr("fdcore.agent.status_changes.create_status", _old_create_status)
    monkeypatch.setattr(archive, "_copy", _old_copy)
    report = simulate(CAUGHT)
    messages = [v.message for v in report.violations if v.invariant == "13"]
    assert any("ended succeeded, then agent-1 wrote it running (attempt 1)" in m for m in messages)
    assert any("after the request ended" in m for m in messages)  # its tables ran again
    assert any("replaced archived archive/" in m for m in messages)


@pytest.mark.parametrize("seed", [2, 3])
def test_with_crashes_pauses_and_store_errors_too(seed: int) -> None:
    # Seeds 2 and 3 failed before run records followed their request into the archive: a
    # final status whose answer was lost, retried after the move (2: no record at all), and a
    # record's create retried after the move took the first copy (3: a live leftover).
    scenario = Scenario(
        seed=seed,
        requests=60,
        take_over=True,
        retention_runs=2.0,
        crash_rate=2.0,
        pause_rate=2.0,
        error_rate=0.02,
        latency=0.05,
        skew=3.0,
    )
    report = simulate(scenario)
    assert report.violations == []
    assert report.checks["requests moved by retention runs"] > 0


def test_retention_run_options_are_checked_and_reproduced(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--retention-runs", "5", "--retention-runs-keep", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--retention-runs-keep: must be greater than 0, got 0") and "\n" not in err
    command = command_line(Scenario(retention_runs=5.0, retention_runs_keep=2.0))
    assert "--retention-runs 5.0 --retention-runs-keep 2.0" in command
