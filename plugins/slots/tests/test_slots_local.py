"""``cron``, ``daily`` and ``weekly``: wall-clock timings, slot ids and daylight saving."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fdcore_slots import Cron, Daily, WallClockTimetable, Weekly

from fdcore.abc import Slot, Timetable
from fdcore.contract.ids import is_valid_id

UTC = timezone.utc
TICK = timedelta(microseconds=1)
BERLIN = {"timezone": "Europe/Berlin"}


def slots_between(timetable: Timetable, start: datetime, end: datetime) -> list[Slot]:
    """Every slot due in ``(start, end]``, walking next_due."""
    found: list[Slot] = []
    slot = timetable.next_due(start)
    while slot.due_at <= end:
        found.append(slot)
        slot = timetable.next_due(slot.due_at)
    return found


def assert_rising(slots: list[Slot]) -> None:
    ids = [slot.id for slot in slots]
    assert ids == sorted(set(ids)), ids
    dues = [slot.due_at for slot in slots]
    assert dues == sorted(set(dues))
    assert all(is_valid_id(slot.id) for slot in slots)


# --- daily ---------------------------------------------------------------------------------


def test_daily_in_utc() -> None:
    timetable = Daily().parse("02:00", {})
    slot = timetable.latest_due(datetime(2027, 1, 15, 9, 30, tzinfo=UTC))
    assert slot == Slot(
        "20270115T0200",
        datetime(2027, 1, 15, 2, tzinfo=UTC),
        datetime(2027, 1, 15, 8, tzinfo=UTC),
    )
    assert timetable.next_due(datetime(2027, 1, 15, 9, 30, tzinfo=UTC)).id == "20270116T0200"
    assert timetable.describe() == "daily 02:00 UTC deadline 6h"


def test_daily_boundary_exactly_at_due_time_and_one_microsecond_before() -> None:
    timetable = Daily().parse("02:00", {})
    due = datetime(2027, 1, 15, 2, tzinfo=UTC)
    assert timetable.latest_due(due) == timetable.next_due(due - TICK)
    slot = timetable.latest_due(due)
    before = timetable.latest_due(due - TICK)
    assert slot is not None and before is not None
    assert slot.id == "20270115T0200"
    assert before.id == "20270114T0200"


@pytest.mark.parametrize("skew", [timedelta(seconds=1), timedelta(seconds=30)])
def test_daily_skewed_clocks_name_the_same_slot(skew: timedelta) -> None:
    timetable = Daily().parse("02:00", BERLIN)
    due = timetable.next_due(datetime(2027, 1, 15, tzinfo=UTC)).due_at
    assert timetable.latest_due(due + skew) == timetable.latest_due(due)
    assert timetable.next_due(due - skew) == timetable.latest_due(due)


def test_daily_in_a_time_zone_names_the_slot_in_utc() -> None:
    timetable = Daily().parse("02:00", BERLIN)
    winter = timetable.next_due(datetime(2027, 1, 15, tzinfo=UTC))
    summer = timetable.next_due(datetime(2027, 7, 14, 12, tzinfo=UTC))
    assert (winter.id, winter.due_at) == ("20270115T0100", datetime(2027, 1, 15, 1, tzinfo=UTC))
    assert (summer.id, summer.due_at) == ("20270715T0000", datetime(2027, 7, 15, 0, tzinfo=UTC))


def test_daily_deadline_option() -> None:
    timetable = Daily().parse("02:00", {"deadline": "2h"})
    slot = timetable.next_due(datetime(2027, 1, 15, tzinfo=UTC))
    assert slot.deadline - slot.due_at == timedelta(hours=2)
    assert timetable.describe() == "daily 02:00 UTC deadline 2h"


def test_daily_spring_forward_runs_once_at_the_end_of_the_gap() -> None:
    # 2027-03-28 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist.
    timetable = Daily().parse("02:30", BERLIN)
    slots = slots_between(
        timetable, datetime(2027, 3, 26, tzinfo=UTC), datetime(2027, 3, 30, tzinfo=UTC)
    )
    assert [
        (slot.id, slot.due_at.astimezone(timetable.zone).strftime("%H:%M")) for slot in slots
    ] == [
        ("20270326T0130", "02:30"),
        ("20270327T0130", "02:30"),
        ("20270328T0100", "03:00"),  # the first instant after the gap
        ("20270329T0030", "02:30"),
    ]
    assert_rising(slots)
    gap_day = slots[2]
    assert gap_day.deadline == gap_day.due_at + timedelta(hours=6)
    assert timetable.latest_due(gap_day.due_at) == gap_day
    assert timetable.latest_due(gap_day.due_at - TICK) == slots[1]


def test_daily_fall_back_runs_once_at_the_first_occurrence() -> None:
    # 2027-10-31 in Berlin: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
    timetable = Daily().parse("02:30", BERLIN)
    slots = slots_between(
        timetable, datetime(2027, 10, 29, tzinfo=UTC), datetime(2027, 11, 2, tzinfo=UTC)
    )
    assert [
        (slot.id, slot.due_at.astimezone(timetable.zone).strftime("%H:%M %Z")) for slot in slots
    ] == [
        ("20271029T0030", "02:30 CEST"),
        ("20271030T0030", "02:30 CEST"),
        ("20271031T0030", "02:30 CEST"),  # the first 02:30; the second one is not a slot
        ("20271101T0130", "02:30 CET"),
    ]
    assert_rising(slots)
    second_pass = datetime(2027, 10, 31, 1, 30, tzinfo=UTC)  # 02:30 CET, the repeat
    assert timetable.latest_due(second_pass) == slots[2]
    assert timetable.next_due(second_pass) == slots[3]


# --- weekly --------------------------------------------------------------------------------


def test_weekly_day_names_are_case_insensitive_and_may_be_full() -> None:
    texts = {
        Weekly().parse(spec, {}).describe() for spec in ("mon 02:00", "MON 2:00", "Monday 02:00")
    }
    assert texts == {"weekly mon 02:00 UTC deadline 6h"}


def test_weekly_is_due_on_its_day() -> None:
    timetable = Weekly().parse("mon 02:00", {})
    slot = timetable.next_due(datetime(2027, 1, 15, tzinfo=UTC))  # a Friday
    assert slot.id == "20270118T0200"
    assert slot.due_at.strftime("%a") == "Mon"
    assert slot.deadline == slot.due_at + timedelta(hours=6)
    assert timetable.next_due(slot.due_at).id == "20270125T0200"
    assert timetable.latest_due(slot.due_at - TICK) == timetable.latest_due(
        datetime(2027, 1, 17, tzinfo=UTC)
    )


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        (datetime(2027, 3, 28, tzinfo=UTC), ("20270328T0100", "03:00 CEST")),  # gap
        (datetime(2027, 10, 31, tzinfo=UTC), ("20271031T0030", "02:30 CEST")),  # repeat
    ],
)
def test_weekly_on_change_days(day: datetime, expected: tuple[str, str]) -> None:
    timetable = Weekly().parse("sun 02:30", BERLIN)
    slot = timetable.next_due(day - timedelta(days=1))
    assert (slot.id, slot.due_at.astimezone(timetable.zone).strftime("%H:%M %Z")) == expected
    assert timetable.next_due(slot.due_at).due_at - slot.due_at > timedelta(days=6)


# --- cron ----------------------------------------------------------------------------------


def test_cron_in_utc() -> None:
    timetable = Cron().parse("*/15 * * * *", {})
    slot = timetable.latest_due(datetime(2027, 1, 15, 2, 7, 30, tzinfo=UTC))
    assert slot == Slot(
        "20270115T0200",
        datetime(2027, 1, 15, 2, tzinfo=UTC),
        datetime(2027, 1, 15, 2, 15, tzinfo=UTC),
    )
    boundary = datetime(2027, 1, 15, 2, 15, tzinfo=UTC)
    assert timetable.latest_due(boundary) == timetable.next_due(boundary - TICK)
    assert timetable.latest_due(boundary - TICK) == slot
    assert timetable.latest_due(boundary + timedelta(seconds=30)) == timetable.latest_due(boundary)


def local_times(timetable: WallClockTimetable, slots: list[Slot]) -> list[str]:
    return [slot.due_at.astimezone(timetable.zone).strftime("%H:%M %Z") for slot in slots]


def test_cron_spring_forward() -> None:
    timetable = Cron().parse("*/30 * * * *", BERLIN)
    slots = slots_between(
        timetable,
        datetime(2027, 3, 28, 0, 15, tzinfo=UTC),
        datetime(2027, 3, 28, 1, 30, tzinfo=UTC),
    )
    # 02:00 and 02:30 CET do not exist: together they run once, at 03:00 CEST
    assert local_times(timetable, slots) == ["01:30 CET", "03:00 CEST", "03:30 CEST"]
    assert [slot.id for slot in slots] == ["20270328T0030", "20270328T0100", "20270328T0130"]
    assert [slot.deadline for slot in slots[:-1]] == [slot.due_at for slot in slots[1:]]
    assert_rising(slots)


def test_cron_fall_back() -> None:
    timetable = Cron().parse("*/30 * * * *", BERLIN)
    slots = slots_between(
        timetable,
        datetime(2027, 10, 30, 23, 45, tzinfo=UTC),
        datetime(2027, 10, 31, 2, 30, tzinfo=UTC),
    )
    # 02:00 and 02:30 happen twice: each runs once, in the first pass (CEST)
    assert local_times(timetable, slots) == [
        "02:00 CEST",
        "02:30 CEST",
        "03:00 CET",
        "03:30 CET",
    ]
    assert [slot.id for slot in slots] == [
        "20271031T0000",
        "20271031T0030",
        "20271031T0200",
        "20271031T0230",
    ]
    assert slots[1].deadline == slots[2].due_at  # the repeated hour is one long slot
    assert_rising(slots)
    for minute in (0, 15, 59):
        repeat = datetime(2027, 10, 31, 1, minute, tzinfo=UTC)  # 02:xx CET, the second pass
        assert timetable.latest_due(repeat) == slots[1]
        assert timetable.next_due(repeat) == slots[2]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (datetime(2027, 3, 26, 12, tzinfo=UTC), ["02:00 CET", "03:00 CEST", "02:00 CEST"]),
        (datetime(2027, 10, 29, 12, tzinfo=UTC), ["02:00 CEST", "02:00 CEST", "02:00 CET"]),
    ],
)
def test_cron_at_two_in_the_morning_on_change_days(start: datetime, expected: list[str]) -> None:
    timetable = Cron().parse("0 2 * * *", BERLIN)
    slots = slots_between(timetable, start, start + timedelta(days=3))
    assert local_times(timetable, slots) == expected
    assert_rising(slots)


def test_cron_in_new_york() -> None:
    # 2027-03-14: 02:00 EST jumps to 03:00 EDT; 2027-11-07: 02:00 EDT goes back to 01:00 EST
    timetable = Cron().parse("30 1,2 * * *", {"timezone": "America/New_York"})
    spring = slots_between(
        timetable, datetime(2027, 3, 14, tzinfo=UTC), datetime(2027, 3, 15, tzinfo=UTC)
    )
    autumn = slots_between(
        timetable, datetime(2027, 11, 7, tzinfo=UTC), datetime(2027, 11, 8, tzinfo=UTC)
    )
    assert local_times(timetable, spring) == ["01:30 EST", "03:00 EDT"]
    assert local_times(timetable, autumn) == ["01:30 EDT", "02:30 EST"]
