"""``every``: interval slots counted from the epoch."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fdcore_slots import Every

UTC = timezone.utc
TICK = timedelta(microseconds=1)


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_slot_number_is_epoch_over_interval() -> None:
    timetable = Every().parse("15m", {})
    now = at(2027, 1, 15, 2, 7, 30)
    slot = timetable.latest_due(now)
    assert slot is not None
    number = int(now.timestamp()) // 900
    assert slot.id == str(number)
    assert slot.due_at == at(2027, 1, 15, 2, 0)
    assert slot.deadline == at(2027, 1, 15, 2, 15)
    assert timetable.next_due(now).id == str(number + 1)
    assert timetable.next_due(now).due_at == slot.deadline


def test_boundary_exactly_at_due_time_and_one_microsecond_before() -> None:
    timetable = Every().parse("15m", {})
    boundary = at(2027, 1, 15, 2, 15)
    due = timetable.latest_due(boundary)
    before = timetable.latest_due(boundary - TICK)
    assert due is not None and before is not None
    assert due.due_at == boundary
    assert before.due_at == boundary - timedelta(minutes=15)
    assert int(due.id) == int(before.id) + 1
    assert timetable.next_due(boundary - TICK) == due
    assert timetable.next_due(boundary).due_at == boundary + timedelta(minutes=15)


@pytest.mark.parametrize("skew", [TICK, timedelta(seconds=1), timedelta(seconds=30)])
def test_skewed_clocks_past_the_boundary_name_the_same_slot(skew: timedelta) -> None:
    timetable = Every().parse("1h", {})
    boundary = at(2027, 6, 1, 12)
    exact = timetable.latest_due(boundary)
    assert timetable.latest_due(boundary + skew) == exact
    # a clock still behind the boundary sees the previous slot, never a different name for this one
    behind = timetable.latest_due(boundary - skew)
    assert behind is not None and exact is not None
    assert int(behind.id) == int(exact.id) - 1
    assert timetable.next_due(boundary - skew) == exact


def test_two_second_interval_for_demos() -> None:
    timetable = Every().parse("2s", {})
    slot = timetable.latest_due(at(2027, 1, 1, 0, 0, 3))
    assert slot is not None
    assert slot.due_at == at(2027, 1, 1, 0, 0, 2)
    assert slot.deadline == at(2027, 1, 1, 0, 0, 4)


def test_now_in_another_zone_is_the_same_instant() -> None:
    timetable = Every().parse("1h", {})
    berlin = timezone(timedelta(hours=2))
    assert timetable.latest_due(datetime(2027, 6, 1, 14, 30, tzinfo=berlin)) == (
        timetable.latest_due(at(2027, 6, 1, 12, 30))
    )


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        Every().parse("1h", {}).latest_due(datetime(2027, 1, 1))


def test_before_the_epoch_there_is_no_slot_yet() -> None:
    timetable = Every().parse("1d", {})
    assert timetable.latest_due(at(1969, 12, 31, 12)) is None
    assert timetable.next_due(at(1969, 12, 31, 12)).id == "0"


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("15x", {}, "every = \"15x\": unknown unit 'x' (use s, m, h, d)"),
        ("15", {}, 'every = "15": missing unit after 15 (use s, m, h, d)'),
        ("0s", {}, 'every = "0s": must be more than 0s'),
        ("1.5s", {}, 'every = "1.5s": must be a whole number of seconds'),
        (900, {}, 'every = 900: must be a text like "15m"'),
        (
            "1d",
            {"timezone": "Europe/Berlin"},
            'timezone = "Europe/Berlin": not used by every schedules: their slots count from '
            "1970-01-01 UTC; use daily, weekly or cron for local times",
        ),
        (
            "1h",
            {"deadline": "10m"},
            'deadline = "10m": not used by every schedules: '
            "a slot's deadline is the next slot's due time",
        ),
    ],
)
def test_bad_specs(spec: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Every().parse(spec, options)
    assert str(caught.value) == message


def test_other_schedule_keys_are_left_to_the_agent() -> None:
    timetable = Every().parse("5m", {"id": "nightly", "entities": ["a"], "shared": True})
    assert timetable.describe() == "every 300s"
