"""Shared schedules under the simulator: invariant (1) with crashes, restarts, pauses and skew.

Real agents share schedules (same id, entities and timing); the checker judges every create of a
slot's request, every slot left without one, and the writes each agent spends per slot. Broken
slot functions and a fleet that does not share its schedule are caught.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

from fdcore.abc import Slot, Timetable
from fdcore.agent.schedules import Schedule
from fdcore.cli.main import main
from fdcore.contract.models import AgentRecord
from fdcore.mailbox.access import Mailbox
from fdcore.settings.agent_toml import AgentConfig
from fdcore.simulator import Scenario, simulate, simulate_world
from fdcore.simulator.scenario import seconds
from fdcore.simulator.world import default_schedules

# Shared by three agents, polled every 30-60 s: crashes whose restarts take up to 6 hours (so
# that now and then every agent is down past a slot's deadline), pauses, clocks up to +-30 s off.
FLEET: dict[str, Any] = {
    "agents": 3,
    "requests": 0,
    "take_over": True,
    "poll_seconds": 45.0,
    "poll_jitter": 0.33,
    "stale_after": 180.0,
    "crash_rate": 0.3,
    "restart_after": 6 * 3600.0,
    "pause_rate": 0.5,
    "skew": 30.0,
}


pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")

#: Hourly slots of the DoD run: make test judges 250; make soak the DESIGN's 1,000
#: (FDCORE_SCHEDULE_HOURS=1000).
DOD_HOURS = int(os.environ.get("FDCORE_SCHEDULE_HOURS", "250"))


def judged(report: Any) -> dict[str, Any]:
    return {k: v for k, v in report.checks.items() if k.startswith(("slot", "unshared slot"))}


def test_three_agents_share_a_schedule_through_crashes_restarts_pauses_and_skew() -> None:
    scenario = Scenario(
        seed=4,
        schedules=("every=5m",),
        unshared_schedules=("every=15m",),
        schedule_hours=50,
        requests=40,
        poison=1,
        **{k: v for k, v in FLEET.items() if k != "requests"},
    )
    world, report = simulate_world(scenario)
    assert report.ok, report.text()
    figures = judged(report)
    assert figures["slots judged"] == 600 and figures["unshared slots judged"] == 200
    assert figures["slots missed, all agents down"] > 0
    missed = figures["slots missed, all agents down"] + figures["slots missed, no poll in window"]
    assert figures["slots with a request"] + missed == figures["slots judged"]
    assert figures["slot creates per agent process max"] == 1
    assert report.checks["crashes"] > 20 and report.checks["pauses"] > 20
    assert report.checks["poison requests failed as they should"] == 1
    # One fingerprint for the shared schedule on every agent's status record.
    mailbox = Mailbox(world.store)
    fingerprints = set()
    for agent in world.agents:
        record = mailbox.read(AgentRecord, f"agents/{agent.name}.json")
        assert record is not None
        fingerprints |= {s.fingerprint for s in record.value.schedules if s.id == "s1"}
    assert len(fingerprints) == 1


@pytest.mark.slow
def test_three_agents_share_an_hourly_schedule_over_1000_slots() -> None:
    # DESIGN's invariant 1 as stated: 3 agents, 1,000+ slots, random restarts, skew up to 30 s
    # (make soak; make test a quarter of the slots, the same faults per hour).
    scenario = Scenario(seed=7, schedules=("every=1h",), schedule_hours=DOD_HOURS, **FLEET)
    report = simulate(scenario)
    assert report.ok, report.text()
    figures = judged(report)
    assert figures["slots judged"] == DOD_HOURS
    # One write per slot per agent: a process restarted inside a slot's window reads first.
    assert figures["slot creates per agent process max"] == 1
    assert figures["slot creates per agent max"] == 1
    assert figures["slots written by two processes of one agent"] == 0
    assert figures["slots missed, all agents down"] > 0
    assert report.checks["crashes"] > 0.4 * DOD_HOURS


def test_an_agent_a_whole_interval_behind_never_creates_a_slot_early() -> None:
    # Clocks an hour apart are far outside what the one-minute grace covers: the others would
    # judge agent-1 lost (no takeover here) and its table leases expired by their clocks, so
    # only invariant 1 is asked of these runs.
    hour = 3600.0
    base: dict[str, Any] = {**FLEET, "skew": 0.0, "crash_rate": 0.5, "take_over": False}
    creates = {}
    for skew in (-hour, +hour):
        scenario = Scenario(
            seed=2,
            schedules=("every=1h",),
            schedule_hours=48,
            agent_skews=(("agent-1", skew),),
            **base,
        )
        world, report = simulate_world(scenario)
        assert not [v for v in report.violations if v.invariant == "1"], report.text()
        creates[skew] = [c for c in world.trace.schedule_creates if c.agent == "agent-1"]
        assert len(creates[skew]) > 20
    # Behind: it names the slot due by its own clock, an hour late in true time, never early.
    behind = creates[-hour]
    assert all(c.time >= seconds(c.created_at) + hour - 0.001 for c in behind)
    assert any(c.landed for c in behind)  # when the others were down
    # The trace does tell early from late: a clock an hour ahead creates every slot early.
    assert all(c.time < seconds(c.created_at) for c in creates[+hour])


# Broken slot functions, plugged in as each agent's schedules: the checker must catch them.


@attrs.frozen
class NamedWhenNoticed:
    """Names the slot after the agent's clock when it noticed the slot, not the due time."""

    inner: Timetable

    def latest_due(self, now: datetime) -> Slot | None:
        slot = self.inner.latest_due(now)
        if slot is None:
            return None
        noticed = now.replace(second=0, microsecond=0)
        return Slot(f"{noticed:%Y%m%dT%H%M}", noticed, slot.deadline)

    def next_due(self, now: datetime) -> Slot:
        return self.inner.next_due(now)

    def describe(self) -> str:
        return self.inner.describe()


@attrs.frozen
class NoDeadline:
    """Gives every slot a deadline a year away: a run that is over comes back."""

    inner: Timetable

    def latest_due(self, now: datetime) -> Slot | None:
        slot = self.inner.latest_due(now)
        return attrs.evolve(slot, deadline=slot.due_at + timedelta(days=365)) if slot else None

    def next_due(self, now: datetime) -> Slot:
        return self.inner.next_due(now)

    def describe(self) -> str:
        return self.inner.describe()


def with_timetable(kind: type[NamedWhenNoticed] | type[NoDeadline]) -> Any:
    def schedules(config: AgentConfig) -> list[Schedule]:
        return [attrs.evolve(s, timetable=kind(s.timetable)) for s in default_schedules(config)]

    return schedules


SHORT: dict[str, Any] = {**FLEET, "schedules": ("every=10m",), "schedule_hours": 3}


def messages(report: Any) -> str:
    return "\n".join(v.message for v in report.violations if v.invariant == "1")


def test_a_slot_function_that_names_slots_when_noticed_is_caught() -> None:
    report = simulate(Scenario(seed=1, **SHORT), schedules=with_timetable(NamedWhenNoticed))
    assert not report.ok
    assert "the slot due by its clock is" in messages(report)


def test_a_slot_function_that_skips_the_deadline_is_caught() -> None:
    report = simulate(Scenario(seed=1, **SHORT), schedules=with_timetable(NoDeadline))
    assert not report.ok
    assert "is not the slot's" in messages(report)  # the deadline it carries


def test_a_fleet_where_only_one_agent_runs_the_schedule_misses_slots_and_is_caught() -> None:
    # DESIGN's first problem: the schedule waits for its one agent while the others are idle.
    def only_agent_1(config: AgentConfig) -> list[Schedule]:
        return default_schedules(config) if config.name == "agent-1" else []

    scenario = Scenario(seed=3, **{**SHORT, "schedule_hours": 12, "crash_rate": 2.0})
    assert simulate(scenario).ok
    report = simulate(scenario, schedules=only_agent_1)
    assert "has no request, though agent-" in messages(report)


def test_with_store_errors_each_slot_still_gets_its_request() -> None:
    # Finding 7 (fixed): a slot was remembered before its create landed, so a store error on
    # the create lost the slot for that process. Now the process tries again at its next poll.
    scenario = Scenario(
        seed=4,
        schedules=("every=10m",),
        schedule_hours=24,
        error_rate=0.1,
        **{**FLEET, "poll_seconds": 30.0, "pause_rate": 0.0, "crash_rate": 0.5},
    )
    report = simulate(scenario)
    assert report.ok, report.text()
    assert report.store_operations["ambiguous_writes"] > 0
    # A process writes a slot's request again only after a store error on its earlier write.
    assert judged(report)["slot creates per agent process max"] > 1


# The command.


def test_simulate_reports_the_schedule_figures(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--seed", "2", "--requests", "0", "--schedule", "every=30m"]
    argv += ["--unshared-schedule", "cron=*/20 * * * *", "--schedule-hours", "4"]
    argv += ["--poll-seconds", "30", "--skew", "30"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "schedules: slots judged 8, slots with a request 8" in out
    assert "unshared slots judged 12" in out
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checks"]["slot creates per agent process max"] == 1
    assert data["scenario"]["schedules"] == ["every=30m"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--schedule", "hourly"], "--schedule: expected TIMING=SPEC with TIMING one of every"),
        (["--schedule", "every=0s"], '--schedule: every=0s: every = "0s": must be more than 0s'),
        (["--unshared-schedule", "cron=1 2 3"], "--unshared-schedule: cron=1 2 3: cron ="),
        (["--agent-skew", "agent-4=1"], "--agent-skew: no agent 'agent-4'"),
        (["--agent-skew", "agent-1"], "--agent-skew: expected NAME=SECONDS"),
        (
            ["--schedule-hours", "0"],
            "--schedule-hours: must be a number from 0.001 to 8784, got 0.0",
        ),
    ],
)
def test_bad_schedule_options_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert "\n" not in err
