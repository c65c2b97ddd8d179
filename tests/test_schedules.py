"""Shared and unshared schedules on the agent: one request per due slot, before its deadline."""

from __future__ import annotations

from datetime import timedelta

from fdcore.contract.models import State
from fdcore.settings.agent_toml import ScheduleConfig
from fdcore.testing.memory_fleet import START, MemoryFleet

HOURLY = ScheduleConfig(
    id="hourly-sales", entities=("sales", "customers"), timing="every", spec="1h", shared=True
)
SLOT = str(int(START.timestamp()) // 3600)  # START is on the hour: this slot is due at START


class CountingCreates:
    """Counts create calls per key prefix, to show at most one conditional write per slot."""

    def __init__(self, fleet: MemoryFleet) -> None:
        self.creates: list[str] = []
        original = fleet.storage.create

        def create(key: str, data: bytes) -> str:
            self.creates.append(key)
            return original(key, data)

        fleet.storage.create = create  # type: ignore[method-assign]


def test_three_agents_make_one_request_per_slot(fdcore_memory_fleet: MemoryFleet) -> None:
    counter = CountingCreates(fdcore_memory_fleet)
    agents = [fdcore_memory_fleet.agent(f"etl-0{n}", schedules=(HOURLY,)) for n in range(3)]
    for _ in range(5):  # many polls within one slot
        for agent in agents:
            agent.poll()
        fdcore_memory_fleet.clock.advance(60)
    requests = [key for key in fdcore_memory_fleet.storage.list("requests/")]
    assert requests == [f"requests/sched-hourly-sales-{SLOT}.json"]
    # The first agent creates it; the others, looking for the first time since they started,
    # find it with a read. Never more than one conditional write per slot per agent.
    assert counter.creates.count(requests[0]) == 1
    fdcore_memory_fleet.clock.advance(3600)  # the next slot: now each agent tries its one create
    for agent in agents:
        agent.poll()
    assert counter.creates.count(f"requests/sched-hourly-sales-{int(SLOT) + 1}.json") == 3
    request = fdcore_memory_fleet.mailbox.request(f"sched-hourly-sales-{SLOT}")
    assert request is not None
    assert request.value.schedule is not None and request.value.schedule.slot == SLOT
    assert request.value.deadline == START + timedelta(hours=1)
    assert request.value.created_at == START


def test_an_agent_coming_up_late_creates_only_the_latest_slot(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fdcore_memory_fleet.clock.advance(3 * 3600 + 10)  # three slots went by with no agent up
    fdcore_memory_fleet.agent("etl-01", schedules=(HOURLY,)).poll()
    assert list(fdcore_memory_fleet.storage.list("requests/")) == [
        f"requests/sched-hourly-sales-{int(SLOT) + 3}.json"
    ]


def test_no_request_after_the_slot_deadline() -> None:
    # Daily at 02:00 with a 1 hour deadline; the agent comes up at 03:30.
    daily = ScheduleConfig(
        id="nightly",
        entities=("sales",),
        timing="daily",
        spec="02:00",
        shared=True,
        options={"deadline": "1h"},
    )
    fleet = MemoryFleet.fresh(START + timedelta(hours=1.5))
    fleet.agent("etl-01", schedules=(daily,)).poll()
    assert list(fleet.storage.list("requests/")) == []


def test_a_clock_an_interval_behind_does_not_create_the_next_slot_early(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    agent = fdcore_memory_fleet.agent("etl-slow", skew=-3600, schedules=(HOURLY,))
    fdcore_memory_fleet.clock.advance(30)
    agent.poll()
    # Its own clock says the previous slot: never the slot due now, which is not its to make early.
    assert f"requests/sched-hourly-sales-{SLOT}.json" not in list(
        fdcore_memory_fleet.storage.list("requests/")
    )


def test_an_unclaimed_slot_request_expires_at_its_deadline(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    maker = fdcore_memory_fleet.agent(
        "etl-01", schedules=(HOURLY,), claim="when_free", concurrency=1
    )
    fdcore_memory_fleet.storage.create(
        "requests/busy.json",
        b'{"id": "busy", "entities": ["x"], "created_at": "2027-01-15T01:00:00Z"}',
    )
    maker.poll()  # claims the older request first, then makes the slot request but has no room
    fdcore_memory_fleet.clock.advance(3601)
    fdcore_memory_fleet.finish_runs(succeeded=True)
    fdcore_memory_fleet.runs.clear()
    for _ in range(2):
        maker.poll()
    status = fdcore_memory_fleet.mailbox.status(f"sched-hourly-sales-{SLOT}")
    assert status is not None and status.value.state is State.EXPIRED


def test_unshared_schedule_runs_only_on_its_own_agent(fdcore_memory_fleet: MemoryFleet) -> None:
    own = ScheduleConfig(id="mine", entities=("t",), timing="every", spec="1h", shared=False)
    owner = fdcore_memory_fleet.agent("etl-01", schedules=(own,))
    other = fdcore_memory_fleet.agent("etl-02", take_over=True)
    other.poll()
    owner.poll()  # creates sched-mine-<slot>-etl-01 and claims it
    other.poll()
    request_id = f"sched-mine-{SLOT}-etl-01"
    assert list(fdcore_memory_fleet.storage.list("requests/")) == [f"requests/{request_id}.json"]
    status = fdcore_memory_fleet.mailbox.status(request_id)
    assert status is not None and status.value.agent == "etl-01"
    assert [run.job.agent for run in fdcore_memory_fleet.runs] == ["etl-01"]


def test_status_record_publishes_schedules_with_fingerprints(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fdcore_memory_fleet.agent("etl-01", schedules=(HOURLY,)).poll()
    record = fdcore_memory_fleet.mailbox.agent("etl-01")
    assert record is not None
    [info] = record.value.schedules
    assert (info.id, info.shared, info.when, info.entities) == (
        "hourly-sales",
        True,
        "every 3600s",
        ["sales", "customers"],
    )
    assert len(info.fingerprint) == 12
