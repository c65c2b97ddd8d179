"""The benchmark suite's machinery (benchmarks/): the claim-policy comparison finds every
installed policy, ``make bench-report`` rewrites only its marked sections and draws the plots
its producers make, and the real-throughput drain measures real agents."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import bench_fleet
import claim_policies
import claim_policies_real
import docs_report
import pytest
import throughput
from bench_fleet import Place
from plugin_distributions import install_distribution

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
# The benchmark functions quieten the "fdcore" logger for their simulations; the fixture puts its
# level back after each test, so later tests' log captures see what they expect.
pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")

PAGE = """# Benchmarks

Hand-written text before.

<!-- bench-report: claim-policies -->
old table
<!-- /bench-report: claim-policies -->

Text between, kept.

<!-- bench-report: operations-by-kind -->
<!-- /bench-report: operations-by-kind -->

Hand-written text after.
"""

ONE_AT_A_TIME = """
    from fdcore import hookimpl


    class OneAtATime:
        name = "one_at_a_time"

        def may_claim(self, load):
            return load.running + load.waiting == 0


    @hookimpl
    def fdcore_claim_policies():
        return [OneAtATime()]
"""


def test_a_section_is_replaced_between_its_markers_and_the_text_around_stays() -> None:
    text = docs_report.replace_section(PAGE, "claim-policies", "| a |\n| b |\n")
    assert "old table" not in text
    assert "<!-- bench-report: claim-policies -->\n| a |\n| b |\n<!-- /bench-report" in text
    for kept in ("Hand-written text before.", "Text between, kept.", "Hand-written text after."):
        assert kept in text
    # Run again: the same page, not a growing one.
    assert docs_report.replace_section(text, "claim-policies", "| a |\n| b |\n") == text


def test_a_missing_or_doubled_marker_is_a_one_line_error_naming_the_page() -> None:
    expected = r"^docs/x.md: expected one '<!-- bench-report: throughput -->'"
    with pytest.raises(ValueError, match=expected):
        docs_report.replace_section(PAGE, "throughput", "x", "docs/x.md")
    pair = "<!-- bench-report: claim-policies -->\n<!-- /bench-report: claim-policies -->\n"
    doubled = PAGE + pair
    with pytest.raises(ValueError, match="claim-policies"):
        docs_report.replace_section(doubled, "claim-policies", "x")


def test_generate_writes_the_tables_of_every_policy_and_each_producers_plot(
    tmp_path: Path, fdcore_quiet_agents: None
) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    drawn: list[docs_report.Options] = []

    def producer(options: docs_report.Options, docs: Path) -> Path:
        drawn.append(options)
        path = docs / "a-plot.png"
        path.write_bytes(b"png")
        return path

    options = docs_report.Options(seeds=(1,), requests=12)
    paths = docs_report.generate(options, ["claim-policies", "plots"], page=page, plots=[producer])
    assert paths == [tmp_path / "a-plot.png"] and drawn == [options]
    text = page.read_text()
    assert "old table" not in text and "Hand-written text after." in text
    for load in claim_policies.LOADS:
        for policy in ("always", "when_free"):
            assert f"| {load} | `{policy}` |" in text
    assert "| load | policy | read | list | create | replace | delete |" in text
    assert "|\n\n_`benchmarks/claim_policies.py --requests 12 --seeds 1`" in text  # not a row


def test_the_suite_compares_a_claim_policy_a_plugin_adds(tmp_path: Path) -> None:
    env = install_distribution(
        tmp_path, "fdcore-one", "fdcore_one", ONE_AT_A_TIME, entry_point="one"
    )
    script = BENCHMARKS / "claim_policies.py"
    argv = [sys.executable, str(script), "--requests", "8", "--seeds", "1", "--loads", "uniform"]
    result = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {row["policy"] for row in rows} >= {"always", "when_free", "one_at_a_time"}
    assert all(row["unfinished"] == 0 for row in rows)


@pytest.mark.slow
def test_real_agents_drain_zero_work_requests_and_the_rate_is_measured() -> None:
    rate, operations = throughput.drain_counted(2, 6, Place())
    assert 0 < rate < 10_000
    writes = throughput.writes_per_request(2, 6)
    assert writes > 2  # at least claim, lease and finish
    assert operations > writes  # the agents' own counts: the reads and listings too


def test_an_agents_operations_are_read_from_its_last_count(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    log.write_text(
        "x: store operations since start: read 1, list 2, create 3, replace 0, delete 0\n"
        "x: claimed r1\n"
        "x: store operations since start: read 10, list 4, create 5, replace 2, delete 1; at"
        " azure prices $0.0001, about $0.10 a month at this rate\n"
    )
    assert throughput.logged_operations(log) == 22
    found = bench_fleet.logged_by_kind(log)
    assert found == {"read": 10, "list": 4, "create": 5, "replace": 2, "delete": 1}
    assert sum(found[kind] for kind in bench_fleet.WRITES) == 8
    assert throughput.logged_operations(tmp_path / "none.log") == 0


@pytest.mark.slow
def test_the_stores_rate_from_several_clients_at_once_is_their_sum(tmp_path: Path) -> None:
    one = bench_fleet.creates_per_second(Place(), count=40)
    two = bench_fleet.creates_per_second(Place(), count=40, clients=2)
    assert one > 0 and two > 0
    created = sorted(kept.name for kept in Path(bench_fleet._KEPT[0]).glob("creates-*/env/*"))
    assert "bench-0" in created and "bench-1" in created  # each client wrote its own files


def test_the_real_comparison_plans_the_same_work_for_every_policy_in_bursts() -> None:
    bursty = claim_policies_real.plan("bursty", 1, 36)
    assert bursty == claim_policies_real.plan("bursty", 1, 36)  # a seed fixes the work
    assert sorted(Counter(when for when, _table in bursty).values()) == [12, 12, 12]
    for _when, table in bursty:
        assert 0 < float(table.rpartition("-s")[2]) <= claim_policies_real.LONGEST


@pytest.mark.slow
def test_real_agents_under_a_claim_policy_report_their_waits() -> None:
    figures = claim_policies_real.run("bursty", "when_free", 1, 6)
    assert 0 <= figures["queue_wait_p50"] <= figures["queue_wait_p99"] < figures["makespan"]
    assert 0 < figures["utilisation"] <= 1


def test_queue_wait_against_load_gives_a_curve_per_policy(fdcore_quiet_agents: None) -> None:
    curves = claim_policies.queue_wait_against_load((0.5, 0.9), requests=10, seeds=(1,))
    assert {"always", "when_free"} <= set(curves)
    for points in curves.values():
        assert [load for load, _p50, _p99 in points] == [0.5, 0.9]
        assert all(0 <= p50 <= p99 for _load, p50, p99 in points)
