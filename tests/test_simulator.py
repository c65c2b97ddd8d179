"""The simulator: real agents under virtual time, seeded faults, invariant checkers.

The simulator itself is tested here: same seed, same report; each fault kind happens and is
survived; each checker fails on a deliberately broken part; the command's output and exit code.
Agent bugs it found live in test_simulator_findings.py.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import shlex
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

from fdcore.abc import HeldLease, Storage
from fdcore.agent.components import Components, StartTable
from fdcore.agent.skew import ClockSkew
from fdcore.builtin.leases import MailboxLeases
from fdcore.cli.main import build_parser, main
from fdcore.contract.models import AgentRecord, Lease
from fdcore.errors import ConfigError
from fdcore.settings.agent_toml import AgentConfig
from fdcore.simulator import (
    Checker,
    Scenario,
    Violation,
    default_checkers,
    simulate,
    simulate_world,
)
from fdcore.simulator import world as world_module
from fdcore.simulator.options import command_line, scenario_from_args
from fdcore.simulator.plan import Plan
from fdcore.simulator.scenario import scenario_of
from fdcore.simulator.world import SimulatedAgent, World, default_parts

# Small runs with every fault: short timings keep the virtual time (and so the polls) down.
FAULTY: dict[str, Any] = {
    "requests": 8,
    "poison": 1,
    "max_tables": 2,
    "table_median": 10.0,
    "stale_after": 30.0,
    "grace_seconds": 30.0,
    "crash_rate": 10.0,
    "pause_rate": 20.0,
    "latency": 0.05,
}

# Smaller runs with every fault, for 10,000 of them: 2 requests and a poison one, timings halved
# again (a poll every 5 s, an agent lost after 20 s), clocks up to 3 s off (the grace covers
# 10 s). Seeds alternate 2 and 3 agents and max_attempts 2 and 3 (see small_scenario).
SMALL: dict[str, Any] = {
    "requests": 2,
    "poison": 1,
    "max_tables": 2,
    "table_median": 5.0,
    "stale_after": 10.0,
    "grace_seconds": 10.0,
    "crash_rate": 60.0,
    "pause_rate": 90.0,
    "latency": 0.05,
    "skew": 3.0,
}


pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")


def broken(report: Any) -> set[str]:
    return {violation.invariant for violation in report.violations}


def test_one_seed_gives_one_report() -> None:
    scenario = Scenario(
        seed=11,
        requests=60,
        take_over=True,
        crash_rate=6,
        pause_rate=6,
        skew=20,
        error_rate=0.02,
        latency=0.05,
        poison=1,
    )
    first, second = simulate(scenario), simulate(scenario)
    assert first.to_json(wall=False) == second.to_json(wall=False)
    assert first.text().split("virtual time")[0] == second.text().split("virtual time")[0]
    other = simulate(attrs.evolve(scenario, seed=12))
    assert other.to_json(wall=False) != first.to_json(wall=False)


def test_a_run_freezes_what_it_keeps_and_thaws_it_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long run freezes its objects every FREEZE_EVERY actions (full collections would walk
    its growing trace again and again); it thaws them at its end, so that a process running
    many (the tests, --runs) collects their garbage, and it leaves a caller's freeze alone."""
    monkeypatch.setattr(world_module, "FREEZE_EVERY", 50)
    frozen: list[int] = []
    freeze = world_module.gc.freeze

    def counted_freeze() -> None:
        freeze()
        frozen.append(gc.get_freeze_count())

    monkeypatch.setattr(world_module.gc, "freeze", counted_freeze)
    scenario = Scenario(seed=3, requests=40)
    assert gc.get_freeze_count() == 0
    report = simulate(scenario)
    assert report.ok and len(frozen) > 1 and frozen[-1] > 0
    assert gc.get_freeze_count() == 0
    # The same report whether or not it froze (a collection changes no outcome).
    monkeypatch.setattr(world_module, "FREEZE_EVERY", 10**9)
    assert simulate(scenario).to_json(wall=False) == report.to_json(wall=False)
    # A caller that froze objects itself keeps them frozen: the run freezes nothing then.
    frozen.clear()
    monkeypatch.setattr(world_module, "FREEZE_EVERY", 50)
    freeze()
    try:
        before = gc.get_freeze_count()
        simulate(scenario)
        assert not frozen and gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


def test_a_seed_fixes_the_plan_and_the_claim_policy_does_not_change_the_work() -> None:
    scenario = Scenario(seed=4, requests=30, poison=2, crash_rate=5, pause_rate=5, skew=10)
    plan, again = Plan(scenario), Plan(scenario)
    assert plan.arrivals == again.arrivals == Plan(attrs.evolve(scenario, claim="always")).arrivals
    assert len(plan.arrivals) == 32 and plan.poison == {"poison-001", "poison-002"}
    assert all(1 <= len(arrival.entities) <= scenario.max_tables for arrival in plan.arrivals)

    def draws(plan: Plan) -> list[tuple[float, ...]]:
        return [
            (agent.skew, agent.first_poll(), agent.poll_interval(), agent.pause_length())
            for agent in plan.agents
        ]

    assert draws(plan) == draws(again)
    assert len({agent.skew for agent in plan.agents}) == scenario.agents
    assert Plan(attrs.evolve(scenario, seed=5)).arrivals != plan.arrivals


def test_a_fault_free_run_finishes_every_request_and_holds_every_invariant() -> None:
    report = simulate(Scenario(seed=3, requests=150))
    assert report.ok, report.text()
    assert report.requests == {"succeeded": 150}
    runs = report.table_runs
    assert runs["started"] == runs["written"] > 150  # 1..3 tables each
    assert runs["rejected"] == runs["cancelled"] == runs["died"] == 0
    assert 0 < report.queue_wait_p50 <= report.queue_wait_p99
    # Every poll writes the agent's record; each table adds lease, status and run-log writes.
    assert report.store_writes == sum(report.store_operations[k] for k in ("create", "replace"))
    assert 10 < report.writes_per_completed < 60
    assert report.virtual_seconds > 0 and report.wall_seconds > 0


def test_when_free_strands_no_request_and_always_strands_many() -> None:
    shared: dict[str, Any] = {
        "seed": 5,
        "requests": 800,
        "load": 0.9,
        "table_sigma": 1.2,
        "archive_after": 600.0,
    }
    when_free = simulate(Scenario(claim="when_free", **shared))
    always = simulate(Scenario(claim="always", **shared))
    assert when_free.ok, when_free.text()
    assert when_free.stranded == 0
    assert always.stranded > 0
    assert always.ok  # stranding is measured under always, not a violation
    assert when_free.queue_wait_p99 < always.queue_wait_p99


#: Requests of the uneven-tables test: make test runs 2,000 (always strands some already);
#: make soak the full 10,000.
UNEVEN_REQUESTS = int(os.environ.get("FDCORE_SIMULATOR_REQUESTS", "2000"))


@pytest.mark.slow
def test_when_free_strands_none_of_10000_requests_with_uneven_tables() -> None:
    # Lognormal tables with sigma 1.5: the slowest 1% run ~30x the median. A large table pool
    # keeps lease contention (which the offered-load estimate leaves out) from overloading it.
    # FDCORE_SIMULATOR_REQUESTS=10000 (make soak) for the full count.
    shared: dict[str, Any] = {
        "seed": 7,
        "requests": UNEVEN_REQUESTS,
        "agents": 4,
        "concurrency": 4,
        "table_pool": 1000,
        "table_median": 10.0,
        "table_sigma": 1.5,
        "load": 0.8,
        "archive_after": 300.0,
    }
    when_free = simulate(Scenario(claim="when_free", **shared))
    assert when_free.requests == {"succeeded": UNEVEN_REQUESTS}
    assert when_free.stranded == 0
    assert when_free.ok, when_free.text()
    always = simulate(Scenario(claim="always", **shared))
    assert always.stranded > 0


def without(scenario: Scenario, *kinds: type) -> list[Checker]:
    return [c for c in default_checkers(scenario) if not isinstance(c, kinds)]


def faulty_scenario(seed: int, claim: str) -> Scenario:
    # a third without takeover: restarts resume work
    return Scenario(seed=seed, claim=claim, take_over=seed % 3 != 0, **FAULTY)


def small_scenario(seed: int, claim: str) -> Scenario:
    agents, max_attempts = 2 + seed % 2, 2 + seed // 2 % 2
    return Scenario(
        seed=seed,
        claim=claim,
        take_over=seed % 3 != 0,
        agents=agents,
        max_attempts=max_attempts,
        **SMALL,
    )


EXERCISED = (
    "crashes",
    "crashes by fault",
    "pauses",
    "requests moved after a crash",
    "attempts marked lost",
    "paused agents resumed after a takeover",
    "poison requests failed as they should",
)


def check_many(
    seeds: range, scenario: Callable[[int, str], Scenario] = faulty_scenario
) -> tuple[Counter[str], Counter[str]]:
    """Run both claim policies over ``seeds``, every checker on (findings 1-5 included); fail
    on any violation, naming the seed and the command that reproduces it. Returns what was
    exercised: in total, and how many runs met each case at least once."""
    total: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    failures = []
    for seed in seeds:
        for claim in ("when_free", "always"):
            report = simulate(scenario(seed, claim))
            if not report.ok:
                failures.append(report.text())
            runs["runs"] += 1
            for name in EXERCISED:
                total[name] += report.checks[name]
                runs[name] += report.checks[name] > 0
    assert not failures, f"{len(failures)} runs failed; the first:\n" + "\n".join(failures[:3])
    return total, runs


def test_invariants_hold_under_crashes_pauses_latency_and_poison() -> None:
    exercised, _runs = check_many(range(15))
    assert exercised["crashes"] > 50 and exercised["pauses"] > 50
    assert exercised["requests moved after a crash"] > 20
    assert exercised["paused agents resumed after a takeover"] > 0
    assert exercised["poison requests failed as they should"] == 30


def test_a_slow_store_costs_no_attempt() -> None:
    report = simulate(Scenario(seed=0, requests=60, take_over=True, latency=2.0))
    assert "lost-own" not in broken(report), report.text()


def test_a_resumed_agent_takes_over_a_request_it_lost_while_paused() -> None:
    report = simulate(Scenario(seed=365, claim="always", take_over=True, **FAULTY))
    assert "3" not in broken(report), report.text()


#: Seeds of the many-seeds test, each run under both claim policies: make test runs 500 (1,000
#: runs: every case asserted below still met, the rarest in 4.4% of them); make soak the full
#: 5,000 (10,000 runs, the DESIGN's figure).
MANY_SEEDS = int(os.environ.get("FDCORE_SIMULATOR_SEEDS", "500"))


@pytest.mark.slow
def test_invariants_hold_over_10000_seeded_runs() -> None:
    # DESIGN: invariants 2-5 over 10,000 seeded runs with crashes, pauses and skew (and every
    # other check): FDCORE_SIMULATOR_SEEDS=5000 (make soak). A failure names its seed and the
    # command that reproduces it.
    total, runs = check_many(range(MANY_SEEDS), small_scenario)  # seeds x 2 claim policies
    assert runs["runs"] == 2 * MANY_SEEDS
    assert total["poison requests failed as they should"] == 2 * MANY_SEEDS
    # Most runs meet each fault; a few in a hundred meet the rarest case.
    assert runs["crashes by fault"] > 0.7 * runs["runs"] and runs["pauses"] > 0.7 * runs["runs"]
    assert runs["attempts marked lost"] > 0.9 * runs["runs"]  # takeovers and restarts, poison's
    assert runs["paused agents resumed after a takeover"] > 0.03 * runs["runs"]


def test_a_slow_store_lapses_leases_and_the_tables_run_again_safely() -> None:
    # Polls delayed by a slow store (4 s per operation on average, heavy-tailed) miss lease
    # renewals; agents after the same few tables take the lapsed leases. The late holders stop
    # (or are fenced out) and run those tables again, without losing an attempt.
    taken = 0
    for seed in range(4):
        scenario = Scenario(seed=seed, requests=30, table_pool=5, take_over=True, latency=4.0)
        report = simulate(scenario)
        assert report.ok, report.text()
        taken += report.checks["leases taken from another holder"]
    assert taken > 0


# Clock skew and store errors.


def test_with_clock_skew_takeovers_stay_in_time_and_writes_stay_fenced() -> None:
    for seed in range(6):
        for claim in ("when_free", "always"):
            scenario = Scenario(
                seed=seed, claim=claim, take_over=True, skew=30, requests=40, crash_rate=6
            )
            report = simulate(scenario)
            assert report.ok, report.text()


def test_with_clock_skew_no_live_agents_lease_is_taken() -> None:
    report = simulate(Scenario(seed=7, requests=300, take_over=True, skew=30))
    assert "2-lease" not in broken(report), report.text()


# Issue 24, item 2: agent-3 runs 20 s ahead, far past the grace, on a store that reports its
# time. Before the fix it took live holders' table leases (seed 1: 81 violations of 2-lease at
# 200 requests; every seed of 1-5 found some).
SKEWED = Scenario(
    seed=1,
    requests=60,
    take_over=True,
    poll_seconds=1.0,
    stale_after=4.0,
    grace_seconds=1.0,
    table_pool=4,
    table_median=3.0,
    agent_skews=(("agent-3", 20.0),),
)


def test_an_agent_whose_clock_runs_past_the_grace_takes_no_live_holders_lease() -> None:
    report = simulate(SKEWED)
    assert report.ok, report.text()
    assert report.checks["leases taken from another holder"] == 0
    # With crashes and pauses: the others take over in time, agent-3 takes nothing over.
    report = simulate(attrs.evolve(SKEWED, requests=100, crash_rate=20, pause_rate=10))
    assert report.ok, report.text()
    assert report.checks["requests moved after a crash"] > 0


class ClockTrustingLeases(MailboxLeases):
    """Leases that judge a holder's lease by the caller's clock whatever its skew (as before
    issue 24): an infinite grace, the skewed agent's refusal, counts as the configured one."""

    def acquire(self, *args: Any, grace: float = 0.0, **kwargs: Any) -> HeldLease | None:
        return super().acquire(*args, grace=1.0 if math.isinf(grace) else grace, **kwargs)


def clock_trusting(config: AgentConfig, storage: Storage, start: StartTable) -> Components:
    parts = default_parts(config, storage, start)
    return Components(parts.claim, parts.takeover, ClockTrustingLeases(storage), start)


def test_an_agent_whose_skewed_clock_takes_live_holders_leases_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Either defence alone holds: leases judged in the store's time (ClockSkew.store_time) ...
    report = simulate(SKEWED, parts=clock_trusting)
    assert report.ok, report.text()
    # ... and without both, as before issue 24, live holders' leases are taken.
    monkeypatch.setattr(ClockSkew, "store_time", lambda self, now: now)
    report = simulate(SKEWED, parts=clock_trusting)
    assert broken(report) == {"2-lease"}, report.text()
    assert "from live agent-" in "\n".join(v.message for v in report.violations)


# Issue 24, item 2, the other way round: agent-1's clock runs behind. Before the fix the others
# judged its leases and record by their clocks: its live leases looked run out and its live
# record stale (seed 1 at 200 requests, grace 1: 69 violations of 2-lease, 165 of 3-live; with
# -20 s the same; with -20 s and the default grace, 60 s, none).
BEHIND = attrs.evolve(SKEWED, agent_skews=(("agent-1", -3600.0),))


@pytest.mark.parametrize("skew", [-3600.0, -20.0])
def test_an_agent_whose_clock_runs_behind_is_judged_by_the_stores_time(skew: float) -> None:
    world, report = simulate_world(attrs.evolve(BEHIND, agent_skews=(("agent-1", skew),)))
    assert report.ok, report.text()
    # It still does its share: it runs tables under leases written in the store's time.
    assert any(write.agent == "agent-1" for write in world.trace.table_writes)
    report = simulate(attrs.evolve(BEHIND, requests=100, crash_rate=20, pause_rate=10))
    assert report.ok, report.text()
    assert report.checks["requests moved after a crash"] > 0
    assert report.checks["leases taken from another holder"] > 0


def test_an_agent_behind_that_writes_its_own_clocks_times_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As before the fix: it measures its skew but writes its record and leases by its clock.

    Its leases are caught. Its record no longer is (``3-live`` was, before liveness came from the
    listing): the others judge it by the store's last-modified time of its record, whatever
    ``updated_at`` its clock wrote (fdcore.agent.liveness)."""
    monkeypatch.setattr(ClockSkew, "store_time", lambda self, now: now)
    report = simulate(BEHIND)
    assert broken(report) == {"2-lease"}, report.text()


def test_with_store_errors_no_table_has_two_writers_and_no_request_is_lost() -> None:
    for seed in range(4):
        scenario = Scenario(seed=seed, take_over=True, requests=60, error_rate=0.03, crash_rate=4)
        report = simulate(scenario)
        assert report.ok, report.text()
        assert report.store_operations["ambiguous_writes"] > 0


def test_with_store_errors_no_attempt_is_lost_and_no_table_runs_twice() -> None:
    report = simulate(Scenario(seed=7, requests=300, take_over=True, error_rate=0.02))
    assert not broken(report) & {"lost-own", "once-per-attempt"}, report.text()


# Deliberately broken parts, plugged in through Components: the checkers must catch them.


class EveryoneLost:
    """A takeover policy that judges every other agent lost at once."""

    name = "everyone_lost"

    def is_lost(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> bool:
        return True


class NoGenerationLeases(MailboxLeases):
    """A lease provider that hands out the table whatever its state, never raising the
    generation: fencing cannot tell writers apart."""

    def acquire(
        self,
        table: str,
        holder: str,
        request: str,
        attempt: int,
        ttl: float,
        now: datetime,
        grace: float = 0.0,
    ) -> HeldLease | None:
        from fdcore.contract.codec import encode
        from fdcore.contract.layout import lease_key

        key = lease_key(table)
        found = self._read(key)
        lease = Lease(
            table=table,
            holder=holder,
            request=request,
            attempt=attempt,
            acquired_at=now,
            expires_at=now + timedelta(seconds=ttl),
            generation=1,
        )
        if found is None:
            return HeldLease(lease, self.storage.create(key, encode(lease)))
        return HeldLease(lease, self.storage.replace(key, encode(lease), found[1]))


def everyone_lost(config: AgentConfig, storage: Storage, start: StartTable) -> Components:
    parts = default_parts(config, storage, start)
    return Components(parts.claim, EveryoneLost(), parts.leases, parts.start_table)


def no_generation(config: AgentConfig, storage: Storage, start: StartTable) -> Components:
    parts = default_parts(config, storage, start)
    return Components(parts.claim, parts.takeover, NoGenerationLeases(storage), start)


def test_a_takeover_policy_that_judges_everyone_lost_is_caught() -> None:
    report = simulate(Scenario(seed=1, requests=40, take_over=True), parts=everyone_lost)
    assert "3-live" in broken(report)
    assert not report.ok


def test_a_lease_provider_without_generations_is_caught() -> None:
    report = simulate(Scenario(seed=1, requests=80, table_pool=3), parts=no_generation)
    assert "2" in broken(report)
    messages = "\n".join(v.message for v in report.violations)
    assert "two writers at once" in messages


def test_a_checker_plugs_in_as_one_more_object() -> None:
    class CountsPolls(Checker):
        invariant = "counted"

        def __init__(self) -> None:
            self.polls = 0

        def after_poll(self, world: World, agent: SimulatedAgent) -> None:
            self.polls += 1

        def finish(self, world: World) -> list[Violation]:
            return [Violation(self.invariant, world.now, f"{self.polls} polls")]

        def summary(self) -> dict[str, Any]:
            return {"counted polls": self.polls}

    counter = CountsPolls()
    scenario = Scenario(seed=2, requests=10)
    report = simulate(scenario, checkers=[*without(scenario), counter])
    assert report.checks["counted polls"] == report.checks["polls"] == counter.polls > 0
    assert [v.message for v in report.violations] == [f"{counter.polls} polls"]


# The command.


def test_simulate_prints_the_figures_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--agents", "3", "--requests", "40", "--seed", "7"])
    out = capsys.readouterr().out
    assert code == 0
    for figure in (
        "requests: succeeded 40",
        "table runs: started",
        "queue wait (created -> started): p50",
        "stranded requests (invariant 6): 0",
        "store operations: read",
        "per completed request",
        "virtual time:",
        "wall time:",
        "all invariants held",
    ):
        assert figure in out


def test_simulate_leaves_the_callers_logging_as_it_was() -> None:
    """The command quiets the agents' log while it runs, in-process too, and puts it back."""
    logger = logging.getLogger("fdcore")
    before = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        assert main(["simulate", "--requests", "5", "--seed", "2", "--json"]) == 0
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)


def test_simulate_json_is_stable_and_complete(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--requests", "30", "--seed", "4", "--take-over", "--crash-rate", "6"]
    main([*argv, "--json"])
    first = json.loads(capsys.readouterr().out)
    main([*argv, "--json"])
    second = json.loads(capsys.readouterr().out)
    for data in (first, second):
        data.pop("wall_seconds")
        data.pop("requests_per_wall_second")
    assert first == second
    assert first["seed"] == 4 and first["scenario"]["take_over"] is True
    assert set(first) >= {
        "requests",
        "table_runs",
        "queue_wait_seconds",
        "stranded_requests",
        "store_operations",
        "store_writes_per_completed_request",
        "virtual_seconds",
        "violations",
    }


def test_a_failing_run_prints_its_seed_and_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(world_module, "default_parts", no_generation)
    code = main(["simulate", "--requests", "80", "--table-pool", "3", "--seed", "9"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED" in out and "(seed 9)" in out and "two writers at once" in out


def test_several_runs_report_the_failing_seeds(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(world_module, "default_parts", everyone_lost)
    code = main(["simulate", "--requests", "20", "--runs", "2", "--seed", "3", "--take-over"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED seeds: 3 4" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--agents", "0"], "--agents: must be 1..1000, got 0"),
        (
            ["--claim", "greedy"],
            "--claim: unknown claim policy 'greedy' (known: always, when_free)",
        ),
        (["--error-rate", "0.7"], "--error-rate: must be a number from 0 to 0.5, got 0.7"),
        (["--max-tables", "9", "--table-pool", "4"], "--max-tables: must be 1..table pool (4)"),
        (["--runs", "0"], "--runs: must be 1..100000, got 0"),
    ],
)
def test_bad_options_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fdcore: error: fdcore simulate: ")
    assert message in err
    assert "\n" not in err


def test_scenario_refuses_bad_values_in_code_too() -> None:
    with pytest.raises(ConfigError, match=r"^poll_seconds: must be at least 0.01, got 0$"):
        Scenario(poll_seconds=0)


def test_plain_values_are_read_strictly_into_a_scenario() -> None:
    assert scenario_of({"seed": 4, "agents": 5, "grace_seconds": 30}).grace_seconds == 30.0
    with pytest.raises(
        ConfigError, match=r"^fdcore simulate: --agents: expected an integer, got '3'$"
    ):
        scenario_of({"agents": "3"})  # not coerced
    with pytest.raises(ConfigError, match="--agent-speed: no agent 'agent-9'"):
        scenario_of({"agent_speeds": [("agent-9", 2.0)]})


def test_a_failing_run_names_its_seed_and_the_command_that_reproduces_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(world_module, "default_parts", no_generation)
    report = simulate(attrs.evolve(small_scenario(9, "always"), requests=40, table_pool=3))
    text = report.text()
    assert not report.ok and "(seed 9)" in text
    command = text.split("reproduce: ")[1].splitlines()[0]
    assert command == (
        "fdcore simulate --seed 9 --requests 40 --claim always --stale-after 10.0 --grace 10.0 "
        "--max-attempts 2 --table-pool 3 --max-tables 2 --table-median 5.0 --poison 1 "
        "--crash-rate 60.0 --pause-rate 90.0 --skew 3.0 --latency 0.05"
    )
    # The command alone reproduces the run: the same violations, the same figures.
    assert main([*shlex.split(command)[1:], "--json"]) == 1
    again = json.loads(capsys.readouterr().out)
    assert again["violations"] == report.to_json()["violations"]
    assert again["command"] == command
    assert again["checks"] == report.checks


def test_the_command_of_a_scenario_gives_back_that_scenario() -> None:
    scenario = Scenario(
        seed=5,
        take_over=True,
        agents=4,
        latency=0.1 + 0.2,  # a float that prints with every digit
        restart_after=600.0,
        schedules=("every=1h", "cron=*/20 8-18 * * mon-fri"),
        unshared_schedules=("daily=02:00",),
        agent_skews=(("agent-2", -12.5),),
    )
    argv = shlex.split(command_line(scenario))
    assert argv[:2] == ["fdcore", "simulate"]
    args = build_parser().parse_args(argv[1:])
    assert scenario_from_args(args, args.seed) == scenario
    assert command_line(Scenario()) == "fdcore simulate --seed 0"


def test_several_runs_print_each_failing_seeds_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(world_module, "default_parts", everyone_lost)
    main(["simulate", "--requests", "20", "--runs", "2", "--seed", "3", "--take-over"])
    out = capsys.readouterr().out
    assert "  reproduce: fdcore simulate --seed 3 --take-over --requests 20" in out
    assert "  reproduce: fdcore simulate --seed 4 --take-over --requests 20" in out
