"""Properties of every timetable, for random times, often close to daylight-saving changes.

For any ``now``: ``latest_due(now).due_at <= now < next_due(now).due_at``, next_due is the slot
right after latest_due (none between them), and ids rise with due times.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import cache
from zoneinfo import ZoneInfo

from fdcore_slots import Cron, Daily, Every, IntervalTimetable, WallClockTimetable, Weekly
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdcore.abc import Timetable
from fdcore.contract.ids import is_valid_id

UTC = timezone.utc
TICK = timedelta(microseconds=1)
# DST forward and back, half-hour DST (Lord Howe), negative DST (Dublin), two changes a year
# around Ramadan (Casablanca), a skipped day (Apia, 2011-12-30), odd offsets (St John's).
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Europe/Dublin",
    "Africa/Casablanca",
    "Pacific/Apia",
    "America/St_Johns",
    "Asia/Kathmandu",
]
CHANGE_YEARS = (2011, 2027)
CRONS = [
    "*/30 * * * *",
    "0 2 * * *",
    "30 2 * * *",
    "15 1-3 * * *",
    "0 0 * * *",
    "45 23 * * 6",
    "*/7 2 * * *",
    "0 0,12 1 * *",
    "59 23 31 12 *",
]
PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@cache
def offset_changes(name: str) -> tuple[datetime, ...]:
    """Instants (to the hour) where ``name``'s UTC offset changes in CHANGE_YEARS."""
    zone = ZoneInfo(name)
    found: list[datetime] = []
    for year in CHANGE_YEARS:
        hour = datetime(year, 1, 1, tzinfo=UTC)
        previous = hour.astimezone(zone).utcoffset()
        while hour.year == year:
            hour += timedelta(hours=1)
            offset = hour.astimezone(zone).utcoffset()
            if offset != previous:
                found.append(hour)
            previous = offset
    return tuple(found)


zones = st.sampled_from(ZONES)
times = (
    st.integers(0, 59)
    .map(lambda minute: f"{minute:02d}")
    .flatmap(lambda minute: st.integers(0, 23).map(lambda hour: f"{hour:02d}:{minute}"))
)
deadlines = st.one_of(st.none(), st.integers(1, 86400).map(lambda seconds: f"{seconds}s"))


def with_zone(zone: str, deadline: str | None = None) -> dict[str, str]:
    options = {"timezone": zone}
    if deadline is not None:
        options["deadline"] = deadline
    return options


timetables = st.one_of(
    st.integers(1, 10**6).map(lambda seconds: Every().parse(f"{seconds}s", {})),
    st.builds(
        lambda spec, zone: Cron().parse(spec, with_zone(zone)), st.sampled_from(CRONS), zones
    ),
    st.builds(
        lambda spec, zone, deadline: Daily().parse(spec, with_zone(zone, deadline)),
        times,
        zones,
        deadlines,
    ),
    st.builds(
        lambda day, spec, zone: Weekly().parse(f"{day} {spec}", with_zone(zone)),
        st.sampled_from(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]),
        times,
        zones,
    ),
)


@st.composite
def instants(draw: st.DrawFn, timetable: Timetable) -> datetime:
    """Any time, a time within two days of an offset change, or a time right at a due time."""
    changes = (
        offset_changes(timetable.zone.key) if isinstance(timetable, WallClockTimetable) else ()
    )
    source = draw(st.sampled_from(["any", "change", "due"] if changes else ["any", "due"]))
    if source == "change":
        base = draw(st.sampled_from(changes))
        return base + draw(st.integers(-2 * 86400 * 10**6, 2 * 86400 * 10**6)) * TICK
    now: datetime = draw(
        st.datetimes(datetime(1990, 1, 1), datetime(2090, 1, 1), timezones=st.just(UTC))
    )
    if source == "due":
        slot = timetable.latest_due(now)
        assert slot is not None
        now = slot.due_at + draw(st.sampled_from([-TICK, timedelta(0), TICK]))
    return now


@PROPERTY_SETTINGS
@given(st.data(), timetables)
def test_latest_and_next_due_bracket_now(data: st.DataObject, timetable: Timetable) -> None:
    now = data.draw(instants(timetable))
    latest = timetable.latest_due(now)
    following = timetable.next_due(now)
    assert latest is not None
    assert latest.due_at <= now < following.due_at
    # next_due is latest_due's successor: nothing is due between them
    assert timetable.next_due(latest.due_at) == following
    assert timetable.latest_due(following.due_at - TICK) == latest
    assert timetable.latest_due(latest.due_at) == latest
    assert timetable.latest_due(following.due_at) == following
    assert is_valid_id(latest.id) and is_valid_id(following.id)
    if isinstance(timetable, IntervalTimetable):
        assert int(following.id) == int(latest.id) + 1
    else:
        assert latest.id < following.id
    assert latest.due_at.tzinfo == UTC
    assert latest.deadline > latest.due_at
    if isinstance(timetable, WallClockTimetable) and timetable.deadline is not None:
        assert latest.deadline == latest.due_at + timetable.deadline
    else:
        assert latest.deadline == following.due_at


@PROPERTY_SETTINGS
@given(st.data(), timetables)
def test_the_same_instant_in_any_zone_names_the_same_slot(
    data: st.DataObject, timetable: Timetable
) -> None:
    now = data.draw(instants(timetable))
    elsewhere = now.astimezone(ZoneInfo(data.draw(zones)))
    assert timetable.latest_due(elsewhere) == timetable.latest_due(now)
    assert timetable.next_due(elsewhere) == timetable.next_due(now)
