"""Test vectors ported from cronsim's own test suite.

Source: https://github.com/cuu508/cronsim, tests/test_cronsim.py (release 2.7, MIT licence);
each test names the cronsim test it comes from. cronsim follows Debian's Vixie cron, our
reference. The vectors we do not pass as cronsim does are the documented differences of
docs/schedules.md ("Where we differ"), each tested here as such:

- ``L``, ``LW``, ``5L``, ``1#2`` and a sixth (seconds) field are refused (Vixie cron has none);
- a day of week 7 reads as 0 (cronsim keeps 7 in its set; both are Sunday);
- cronsim's DST vectors: we keep our own daylight-saving rules (test_slots_local.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import product

import pytest
from fdcore_slots.cron import CronError, parse_cron

NOW = datetime(2020, 1, 1)


def following(expression: str, start: datetime, count: int) -> list[str]:
    """The next ``count`` due wall minutes after ``start``, as cronsim's tests write them."""
    schedule = parse_cron(expression)
    times: list[str] = []
    wall = start
    for _ in range(count):
        found = schedule.next_after(wall)
        assert found is not None
        times.append(found.isoformat())
        wall = found
    return times


# --- TestParse ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "field", "values"),
    [
        ("* * * * *", "minutes", set(range(0, 60))),  # test_it_parses_stars
        ("* * * * *", "hours", set(range(0, 24))),
        ("* * * * *", "days", set(range(1, 32))),
        ("* * * * *", "months", set(range(1, 13))),
        ("* * * * *", "weekdays", set(range(0, 7))),  # cronsim: 0..7 (7 is Sunday, folded)
        ("1 * * * *", "minutes", {1}),  # test_it_parses_numbers
        ("* * * * 1", "weekdays", {1}),  # test_it_parses_weekday
        ("* * * * 0", "weekdays", {0}),  # test_it_handles_0_sunday
        ("1,2,3 * * * *", "minutes", {1, 2, 3}),  # test_it_parses_list
        ("1-3 * * * *", "minutes", {1, 2, 3}),  # test_it_parses_interval
        ("1-3,7-9 * * * *", "minutes", {1, 2, 3, 7, 8, 9}),  # test_it_parses_two_intervals
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),  # test_it_parses_step
        ("0-10/2 * * * *", "minutes", {0, 2, 4, 6, 8, 10}),  # test_it_parses_interval_with_step
        ("5/15 * * * *", "minutes", {5, 20, 35, 50}),  # test_it_parses_start_with_step
        ("* * * * MON", "weekdays", {1}),  # test_it_parses_symbolic_weekday
        ("* * * * mon", "weekdays", {1}),  # test_it_parses_lowercase_symbolic_weekday
        ("* * * JAN *", "months", {1}),  # test_it_parses_symbolic_month
        ("* * * * 0-2", "weekdays", {0, 1, 2}),  # test_it_parses_weekday_range_from_zero
        ("* * * * sun-tue", "weekdays", {0, 1, 2}),  # test_it_parses_sun_tue
        ("* * * * */2", "weekdays", {0, 2, 4, 6}),  # test_it_starts_weekday_step_from_zero
        ("* * * * 7", "weekdays", {0}),  # test_it_accepts_weekday_7 (cronsim: {7})
    ],
)
def test_parse(expression: str, field: str, values: set[int]) -> None:
    assert set(getattr(parse_cron(expression), field)) == values


@pytest.mark.parametrize(
    ("expression", "days_and"),
    [
        ("* * * * 1", True),  # test_it_parses_unrestricted_day_restricted_dow
        ("* * 1 * *", True),  # test_it_parses_restricted_day_unrestricted_dow
        ("* * 1 * 1", False),
        ("* * */2 * 1", True),
        ("* * 1 * */2", True),
    ],
)
def test_day_rule_follows_the_leading_star(expression: str, days_and: bool) -> None:
    assert parse_cron(expression).days_and is days_and


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * * *",  # test_it_parses_6th_field: seconds
        "* * L * *",  # test_it_parses_day_l
        "* * LW * *",  # test_it_parses_day_lw
        "* * l * *",  # test_it_parses_day_lowercase_l
        "* * lw * *",  # test_it_parses_day_lowercase_lw
        "* * * * 1#2",  # test_it_parses_nth_weekday
        "* * L/2 * *",  # test_it_accepts_l_with_step
        "* * LW/2 * *",  # test_it_accepts_lw_with_step
        "* * * * 1,2,3#1",  # test_it_handles_a_mix_of_ints_and_tuples
        "* * * * 5L",  # test_it_accepts_weekday_l
        "1 1 */100 * MON#4",  # test_it_handles_no_matches
    ],
)
def test_extensions_that_vixie_cron_lacks_are_refused(expression: str) -> None:
    with pytest.raises(CronError):
        parse_cron(expression)


# --- TestValidation -------------------------------------------------------------------------

BAD_PATTERNS = (
    "%s * * * *",
    "* %s * * *",
    "* * %s * *",
    "* * * %s * ",
    "* * * * %s",
    "* * * * * %s",
    "* * * * * * %s",
    "1-%s * * * *",
    "%s-60 * * * *",
    "* * 1-%s * *",
    "* * 1,%s * *",
    "* * %s/1 * *",
    "* * * %s-DEC *",
    "* * * JAN-%s *",
    "* * * * %s-SUN",
    "* * * * MON-%s",
    "1-%s * * * * *",
    "%s-60 * * * * *",
)
BAD_VALUES = ("-1", "61", "ABC", "2/", "/2", "2#", "#2", "1##1", "1//2", "¹", "LL", "LWX")


@pytest.mark.parametrize(("pattern", "value"), list(product(BAD_PATTERNS, BAD_VALUES)))
def test_it_rejects_bad_values(pattern: str, value: str) -> None:
    with pytest.raises(CronError):
        parse_cron(pattern % value)


@pytest.mark.parametrize(
    "expression",
    [
        "* * * *",  # test_it_rejects_4_components
        "* * 5-1 * *",  # test_it_rejects_lopsided_range
        "1-1_0 * * * *",  # test_it_rejects_underscores
        "*/0 * * * *",  # test_it_rejects_zero_step
        "* * * * 1#0",  # test_it_rejects_zero_nth
        "* * * * 1#6",  # test_it_rejects_big_nth
        "* * 30 2 *",  # test_it_checks_day_of_month_range
        "* * 31 4 *",
        "* * * * 5L-6",  # test_it_rejects_dow_l_range
        "* * * * 5L#1",  # test_it_rejects_dow_l_hash
        "* * * * 5L/3",  # test_it_rejects_dow_l_slash
        "* * * * MONL",  # test_it_rejects_symbolic_dow_l
        # not from cronsim: numbers too long for int()
        "1" * 5000 + " * * * *",
        "*/" + "0" * 5000 + " * * * *",
    ],
)
def test_it_rejects(expression: str) -> None:
    with pytest.raises(CronError):
        parse_cron(expression)


# --- TestIterator ---------------------------------------------------------------------------


def test_it_handles_dow_star() -> None:
    # "First Sunday of the month"
    assert following("1 1 1-7 * */7", NOW, 4) == [
        "2020-01-05T01:01:00",
        "2020-02-02T01:01:00",
        "2020-03-01T01:01:00",
        "2020-04-05T01:01:00",
    ]


def test_it_handles_dom_star() -> None:
    # "First Monday of the month"
    assert following("1 1 */100,1-7 * MON", NOW, 4) == [
        "2020-01-06T01:01:00",
        "2020-02-03T01:01:00",
        "2020-03-02T01:01:00",
        "2020-04-06T01:01:00",
    ]


def test_it_handles_every_x_weekdays() -> None:
    # "every 3rd weekday" means "every 3rd weekday starting from Sunday"
    assert following("1 1 * * */3", NOW, 4) == [
        "2020-01-01T01:01:00",
        "2020-01-04T01:01:00",
        "2020-01-05T01:01:00",
        "2020-01-08T01:01:00",
    ]


# --- TestReverse: going back over the due times going forward finds them all -----------------

REVERSE_SAMPLES = [
    "* * * * *",
    "0 * * * *",
    "*/30 * * * *",
    "*/15 * * * *",
    "0 */2 * * *",
    "30 */2 * * *",
    "0 */3 * * *",
    "0 1,2,3,4,5 * * *",
    "30 1,2,3,4,5 * * *",
    "0 2 * * *",
    "0 3 * * *",
    "0 4 * * *",
    "0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *",
    "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *",
    "0 1-5 * * *",
    "15 3 * * *",
    "* 1-6 * * *",
    "1 1 1-7 * */7",
    "1 1 */100,1-7 * MON",
    "1 1 * * */3",
    # cronsim's L, LW, 5L, 0L, 7L, 1#2 and 6-field samples are refused here (see above)
]


@pytest.mark.parametrize("expression", REVERSE_SAMPLES)
@pytest.mark.parametrize(
    "start", [NOW, datetime(2021, 3, 28, 1, 30), datetime(2021, 10, 31, 1, 30)]
)
def test_reverse(expression: str, start: datetime) -> None:
    schedule = parse_cron(expression)
    forward = [datetime.fromisoformat(text) for text in following(expression, start, 5)]
    backward: list[datetime] = []
    wall = forward[-1] - timedelta(minutes=1)
    for _ in range(4):
        found = schedule.latest_at(wall)
        assert found is not None
        backward.append(found)
        wall = found - timedelta(minutes=1)
    assert backward == forward[-2::-1]
