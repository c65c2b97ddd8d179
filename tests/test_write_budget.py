"""The write budget (issue 12): writes per completed one-table request and agent-record writes
per agent-hour, as ``fdcore simulate`` reports them, and the guarantees they must keep.

The 10,000 seeded runs of ``tests/test_simulator.py`` (slow) and docs/benchmarks.md ("Writes per
request") are the long form; these are the short one.
"""

from __future__ import annotations

import json

import pytest

from fdcore.cli.main import main
from fdcore.simulator import Scenario, simulate

pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")


def test_a_one_table_request_costs_at_most_six_writes_and_the_heartbeat_its_budget() -> None:
    report = simulate(Scenario(seed=11, requests=300, claim="when_free", max_tables=1))
    assert report.ok, report.text()
    assert report.requests == {"succeeded": 300}
    assert report.writes_per_one_table_request is not None
    # 5 writes (claim started, lease and fence, finish, run record) and the lease renewals of
    # the longer tables.
    assert 5.0 <= report.writes_per_one_table_request <= 6.0
    assert report.record_writes_budget == 3600 / (60 / 4)
    assert report.record_writes_per_agent_hour <= report.record_writes_budget
    assert report.writes_by_folder["agents"] < report.writes_by_folder["status"]


def test_with_more_tables_only_the_one_table_requests_are_counted() -> None:
    report = simulate(Scenario(seed=3, requests=60, max_tables=3))
    assert report.ok, report.text()
    assert report.writes_per_one_table_request is not None
    assert report.writes_per_one_table_request <= 6.5
    assert report.writes_per_completed > report.writes_per_one_table_request


@pytest.mark.parametrize("claim", ["always", "when_free"])
def test_every_invariant_holds_with_the_budget_under_store_errors_and_faults(claim: str) -> None:
    # Crashes, pauses, skew and store errors (half of the failing writes landed) over 30 seeds.
    for seed in range(30):
        scenario = Scenario(
            seed=seed,
            claim=claim,
            take_over=True,
            requests=8,
            poison=1,
            max_tables=2,
            table_median=10.0,
            stale_after=30.0,
            grace_seconds=30.0,
            crash_rate=10.0,
            pause_rate=20.0,
            skew=10.0,
            latency=0.05,
            error_rate=0.05,
        )
        report = simulate(scenario)
        assert report.ok, report.text()


def test_simulate_reports_both_figures(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--requests", "20", "--seed", "4", "--max-tables", "1"]
    main(argv)
    out = capsys.readouterr().out
    assert "store writes per completed one-table request: " in out
    assert "agent-record writes per agent-hour: " in out
    main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["store_writes_per_completed_one_table_request"] <= 6
    record = data["agent_record_writes_per_agent_hour"]
    assert record["budget"] == 240.0 and 0 < record["measured"] <= 240.0
