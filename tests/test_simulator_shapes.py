"""The simulator's load shapes for the claim-policy benchmarks: bursty arrivals, agents of
different speeds, one agent larger than the rest, and claim policies found through the plugins."""

from __future__ import annotations

import shlex
from collections import Counter

import pytest

from fdcore.cli.main import build_parser, main
from fdcore.simulator import Scenario, simulate_world
from fdcore.simulator.options import command_line, scenario_from_args
from fdcore.simulator.plan import Plan, plan_arrivals
from fdcore.simulator.scenario import claim_policies

pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")


def test_bursty_arrivals_come_in_bursts_at_the_same_offered_load() -> None:
    bursty = plan_arrivals(Scenario(seed=4, requests=200, arrival="bursty", burst=25))
    times = Counter(arrival.time for arrival in bursty)
    assert sorted(times.values()) == [25] * 8  # 8 bursts of 25, each at one instant
    poisson = plan_arrivals(Scenario(seed=4, requests=200))
    assert len(set(a.time for a in poisson)) == 200
    # The same load: bursts come burst times less often, so both spans are of one size.
    ratio = max(a.time for a in bursty) / max(a.time for a in poisson)
    assert 0.3 < ratio < 3


def test_a_faster_agent_runs_its_tables_in_less_virtual_time() -> None:
    scenario = Scenario(
        seed=2, agents=2, requests=40, max_tables=1, agent_speeds=(("agent-1", 4.0),)
    )
    world, report = simulate_world(scenario)
    assert report.ok, report.text()
    plan = Plan(scenario)
    by_agent: dict[str, list[float]] = {"agent-1": [], "agent-2": []}
    for end in world.trace.table_writes:
        planned = plan.table_seconds(end.request, end.table)
        by_agent[end.agent].append((end.time - end.run_started) / planned)
    assert by_agent["agent-1"] and by_agent["agent-2"]
    assert all(share == pytest.approx(0.25) for share in by_agent["agent-1"])
    assert all(share == pytest.approx(1.0) for share in by_agent["agent-2"])


def test_a_larger_agent_gets_more_workers_and_the_fleet_counts_them() -> None:
    scenario = Scenario(agents=3, concurrency=2, agent_concurrency=(("agent-1", 8),))
    assert scenario.workers == 12
    plan = Plan(scenario)
    assert plan.agent_config("agent-1", "memory://x").concurrency == 8
    assert plan.agent_config("agent-2", "memory://x").concurrency == 2
    # Offered load counts every worker: 12, not 3 x 2.
    even = Scenario(agents=3, concurrency=4)
    assert scenario.arrival_rate == pytest.approx(even.arrival_rate)
    world, report = simulate_world(
        Scenario(
            seed=3,
            agents=2,
            concurrency=1,
            requests=30,
            arrival="all",
            table_pool=100,
            max_tables=1,
            claim="when_free",
            agent_concurrency=(("agent-1", 5),),
        )
    )
    assert report.ok, report.text()
    starts = Counter(start.agent for start in world.trace.table_starts)
    assert starts["agent-1"] > 2 * starts["agent-2"]
    assert report.text().startswith(
        "seed 3: 2 agents x 1 workers (agent-1 5 workers), claim when_free"
    )


def test_the_claim_policies_are_the_installed_plugins() -> None:
    assert {"always", "when_free"} <= set(claim_policies())


def test_the_new_options_round_trip_through_the_command_line() -> None:
    scenario = Scenario(
        seed=3,
        agents=3,
        arrival="bursty",
        burst=7,
        agent_speeds=(("agent-2", 0.5),),
        agent_concurrency=(("agent-1", 6),),
    )
    argv = shlex.split(command_line(scenario))
    args = build_parser().parse_args(argv[1:])
    assert scenario_from_args(args, args.seed) == scenario


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--burst", "0"], "--burst: must be 1..10000000, got 0"),
        (
            ["--arrival", "waves"],
            "--arrival: unknown arrival 'waves' (known: poisson, bursty, all)",
        ),
        (["--agent-speed", "agent-9=2"], "--agent-speed: no agent 'agent-9'"),
        (
            ["--agent-speed", "agent-1=0"],
            "--agent-speed: agent-1: must be a number from 0.001 to 1000, got 0.0",
        ),
        (["--agent-speed", "agent-1=fast"], "--agent-speed: expected NAME=FACTOR"),
        (["--agent-concurrency", "agent-1=0"], "--agent-concurrency: agent-1: must be 1..1024"),
        (["--agent-concurrency", "agent-1=2.5"], "--agent-concurrency: expected NAME=WORKERS"),
    ],
)
def test_bad_shape_options_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fdcore: error: fdcore simulate: ")
    assert message in err
    assert "\n" not in err
