"""The cron slot function against its reference and against the engine it replaced.

- cronsim (Debian's Vixie cron semantics) is the reference: over thousands of random
  expressions we accept and refuse the same ones and find the same due times, forward and back,
  apart from the differences docs/schedules.md lists ("Where we differ").
- croniter was the engine before: wherever an expression keeps its meaning, the due wall times,
  and so the slot ids and deadlines, are exactly the ones croniter gave. Where the meaning
  changed, it is one of the changes docs/schedules.md lists ("Expressions that changed").
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta

import pytest
from croniter import croniter
from cronsim import CronSim, CronSimError
from fdcore_slots.cron import DAYS, MONTHS, CronError, CronSchedule, parse_cron

EXPRESSIONS = 2000
MINUTE = timedelta(minutes=1)
# "a-a/n": cronsim before 2.9 read it as "a/n" (a to the end of the field), Vixie cron and we as "a"
SINGLE_VALUE_RANGE_STEP = re.compile(r"(?<![0-9a-z])(\w+)-\1/")


def _item(rng: random.Random, low: int, high: int, names: tuple[str, ...]) -> str:
    def value() -> str:
        number = rng.randint(low, high)
        index = number - low
        if names and index < len(names) and rng.random() < 0.3:
            return rng.choice([names[index], names[index].upper()])
        return str(number)

    kind = rng.random()
    if kind < 0.2:
        return "*"
    if kind < 0.35:
        return f"*/{rng.randint(1, high + 2)}"
    if kind < 0.6:
        return value()
    if kind < 0.8:
        first, last = sorted([rng.randint(low, high), rng.randint(low, high)])
        return f"{first}-{last}" + (f"/{rng.randint(1, 5)}" if rng.random() < 0.3 else "")
    return f"{value()}/{rng.randint(1, 8)}"


def random_expression(rng: random.Random) -> str:
    bounds = [(0, 59, ()), (0, 23, ()), (1, 31, ()), (1, 12, MONTHS), (0, 7, DAYS)]
    return " ".join(
        ",".join(_item(rng, low, high, names) for _ in range(rng.choice([1, 1, 1, 2, 3])))
        for low, high, names in bounds
    )


def random_cases(seed: int) -> list[tuple[str, datetime]]:
    rng = random.Random(seed)
    cases = []
    while len(cases) < EXPRESSIONS:
        expression = random_expression(rng)
        if SINGLE_VALUE_RANGE_STEP.search(expression):
            continue
        start = datetime(1990, 1, 1) + timedelta(minutes=rng.randint(0, 60 * 24 * 365 * 60))
        cases.append((expression, start))
    return cases


def test_same_expressions_accepted_and_same_due_times_as_cronsim() -> None:
    compared = 0
    for expression, start in random_cases(seed=13):
        try:
            schedule = parse_cron(expression)
        except CronError:
            with pytest.raises(CronSimError):
                CronSim(expression, start)
            continue
        forward = CronSim(expression, start)
        wall = start
        for _ in range(5):
            found = schedule.next_after(wall)
            assert found == next(forward), (expression, wall)
            assert found is not None
            wall = found
        back = CronSim(expression, wall, reverse=True)
        for _ in range(5):
            found = schedule.latest_at(wall - MINUTE)
            assert found == next(back), (expression, wall)
            assert found is not None
            wall = found
        compared += 1
    assert compared > EXPRESSIONS * 0.9


def garbled_expression(rng: random.Random) -> str:
    """Five fields, each now and then with a bad item: a value out of range, a name in the wrong
    field, a wrap-around range, a zero or missing step, an empty item."""
    atoms = [str(rng.randint(0, 70)) for _ in range(4)] + [
        rng.choice(MONTHS),
        rng.choice(DAYS).upper(),
        "*",
        "",
        "x",
    ]

    def bad_item() -> str:
        form = rng.choice(["a", "a-b", "a/n", "a-b/n", "*/n", "a-", "/n", "a//n", "a-b-c"])
        return (
            form.replace("a", rng.choice(atoms))
            .replace("b", rng.choice(atoms))
            .replace("c", rng.choice(atoms))
            .replace("n", str(rng.randint(0, 9)))
        )

    fields = random_expression(rng).split()
    for index in range(5):
        if rng.random() < 0.15:
            fields[index] = ",".join([fields[index], bad_item()][:: rng.choice([1, -1])])
    return " ".join(fields)


def test_same_expressions_refused_as_cronsim() -> None:
    rng = random.Random(15)
    refused = accepted = 0
    for _ in range(EXPRESSIONS):
        expression = garbled_expression(rng)
        if len(expression.split()) != 5 or SINGLE_VALUE_RANGE_STEP.search(expression):
            continue  # an empty field merges two; "a-a/n" is tested as a difference
        try:
            parse_cron(expression)
        except CronError as exc:
            assert len(str(exc).splitlines()) == 1
            with pytest.raises(CronSimError):
                CronSim(expression, datetime(2027, 1, 1))
            refused += 1
            continue
        CronSim(expression, datetime(2027, 1, 1))
        accepted += 1
    assert refused > EXPRESSIONS / 10
    assert accepted > EXPRESSIONS / 10


def _croniter_days(expression: str) -> tuple[list[set[int]], bool]:
    """The fields croniter expanded an expression to, and whether its day rule was AND."""
    full = [set(range(60)), set(range(24)), set(range(1, 32)), set(range(1, 13)), set(range(7))]
    expanded = croniter(expression).expanded
    fields = [
        full[index] if "*" in values else set(values) for index, values in enumerate(expanded)
    ]
    fields[4] = {day % 7 for day in fields[4]}
    return fields, expanded[2][0] == "*" or expanded[4][0] == "*"


def _due_days(days: set[int], weekdays: set[int], both: bool) -> set[tuple[int, int]]:
    return {
        (day, weekday)
        for day in range(1, 32)
        for weekday in range(7)
        if ((day in days and weekday in weekdays) if both else (day in days or weekday in weekdays))
    }


def _same_meaning(schedule: CronSchedule, expression: str) -> bool:
    (minutes, hours, days, months, weekdays), both = _croniter_days(expression)
    return (minutes, hours, months) == (
        set(schedule.minutes),
        set(schedule.hours),
        schedule.months,
    ) and _due_days(days, weekdays, both) == _due_days(
        set(schedule.days), set(schedule.weekdays), schedule.days_and
    )


def test_unchanged_expressions_keep_croniters_due_times_and_changes_are_the_listed_ones() -> None:
    unchanged = 0
    for expression, start in random_cases(seed=14):
        if re.search(r"(?<![0-9a-z])(\w+)-\1\b", expression):
            continue  # "5-5" was refused before: no agent of the old version runs it
        try:
            schedule = parse_cron(expression)
        except CronError:
            continue
        if not _same_meaning(schedule, expression):
            # the two listed changes: the day rule follows the leading "*" (not croniter's
            # expansion of a field to the full range), and "a/n" steps in day-of-week reach 7
            (_, _, days, _, weekdays), both = _croniter_days(expression)
            day_rule = both != schedule.days_and and days == set(schedule.days)
            weekday_step = "/" in expression.split()[4] and weekdays != set(schedule.weekdays)
            assert day_rule or weekday_step, expression
            continue
        old_next = croniter(expression, start)
        wall = start
        for _ in range(5):
            found = schedule.next_after(wall)
            assert found == old_next.get_next(datetime), (expression, wall)
            assert found is not None
            wall = found
        old_prev = croniter(expression, wall)
        for _ in range(5):
            found = schedule.latest_at(wall - MINUTE)
            assert found == old_prev.get_prev(datetime), (expression, wall)
            assert found is not None
            wall = found
        unchanged += 1
    # how many differ is croniter's to change (a release that reads "1-7" as we do differs less):
    # only that every difference is a listed one is ours to assert
    assert unchanged > EXPRESSIONS / 2


# --- the cases of issue 13, each against the reference ------------------------------------


def days_due(expression: str, count: int = 8) -> list[str]:
    schedule = parse_cron(expression)
    found: list[str] = []
    wall = datetime(2027, 1, 1)
    while len(found) < count:
        after = schedule.next_after(wall)
        assert after is not None
        found.append(after.date().isoformat())
        wall = after
    reference = CronSim(expression, datetime(2027, 1, 1))
    assert found == [next(reference).date().isoformat() for _ in range(count)]
    return found


def test_a_field_starting_with_a_star_makes_days_match_both_fields() -> None:
    # odd-numbered Mondays, not "odd days or Mondays"
    assert days_due("0 0 */2 * 1", 3) == ["2027-01-11", "2027-01-25", "2027-02-01"]
    # first Sunday, first Monday of the month: the classic idioms
    assert days_due("1 1 1-7 * */7", 3) == ["2027-01-03", "2027-02-07", "2027-03-07"]
    assert days_due("1 1 */100,1-7 * MON", 3) == ["2027-01-04", "2027-02-01", "2027-03-01"]
    # neither starts with a star: either matches
    assert days_due("0 0 13 * fri", 3) == ["2027-01-08", "2027-01-13", "2027-01-15"]


def test_a_full_week_means_the_same_however_it_is_spelt() -> None:
    # croniter read "1-7" (and lists holding "*") as "*", "0-6" not: now all are a list that
    # covers the week, so with a day of month not starting with "*" every day is due (OR)
    every_day = days_due("0 0 1,5,9,13,17,21,25,29 * 0-6")
    assert every_day == days_due("0 0 1,5,9,13,17,21,25,29 * 1-7")
    assert every_day == days_due("0 0 1,5,9,13,17,21,25,29 * sun-sat")
    assert every_day == days_due("0 0 1,5,9,13,17,21,25,29 * 1-5,*,0")
    assert every_day == [f"2027-01-{day:02d}" for day in range(2, 10)]
    # ... while a day of month starting with "*" makes it AND: the leading star decides
    days_1_5_9 = days_due("0 0 */4 * 0-6")
    assert days_1_5_9 == days_due("0 0 */4 * 1-7") == days_due("0 0 */4 * *")
    assert days_1_5_9[:3] == ["2027-01-05", "2027-01-09", "2027-01-13"]


def test_steps_from_a_value_in_day_of_week_run_to_seven() -> None:
    assert parse_cron("0 0 * * 1/6").weekdays == {1, 0}  # Monday and Sunday (7)
    assert parse_cron("0 0 * * 7/6").weekdays == {0}  # Sunday only
    assert parse_cron("0 0 * * mon/2").weekdays == {1, 3, 5, 0}
    days_due("0 0 * * 1/6")
    days_due("0 0 * * 7/6")


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 * * 5-1",
        "0 0 * * fri-mon",
        "0 0 1 dec-feb *",
        "0 0 * * 7-0",
        "0 3 * * 7-sun",
        "5-1 * * * *",
    ],
)
def test_wrap_around_ranges_are_refused(expression: str) -> None:
    with pytest.raises(CronError, match="ends before it starts"):
        parse_cron(expression)
    with pytest.raises(CronSimError):
        CronSim(expression, datetime(2027, 1, 1))


@pytest.mark.parametrize(
    ("macro", "expression"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@Daily", "0 0 * * *"),
    ],
)
def test_macros(macro: str, expression: str) -> None:
    assert parse_cron(macro) == parse_cron(expression)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("@reboot", "@reboot is not a time (it runs when cron starts)"),
        (
            "@often",
            "unknown macro '@often' (use @yearly, @annually, @monthly, @weekly, @daily, "
            "@midnight, @hourly)",
        ),
        ("@daily 5", "need 5 fields (minute hour day-of-month month day-of-week), got 2"),
    ],
)
def test_other_macros_are_refused_by_name(text: str, reason: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(text)
    assert str(caught.value) == reason


def test_a_day_of_month_no_month_has_is_kept_with_the_either_rule() -> None:
    # Vixie cron runs it on February's Mondays; so does cronsim since 2.8
    assert days_due("0 2 30 2 mon", 2) == ["2027-02-01", "2027-02-08"]
    schedule = parse_cron("0 2 30 2 mon")
    assert schedule.next_after(datetime(2027, 1, 1)) == datetime(2027, 2, 1, 2, 0)
    assert schedule.next_after(datetime(2027, 2, 22, 2, 0)) == datetime(2028, 2, 7, 2, 0)
    with pytest.raises(CronError, match="never due"):
        parse_cron("0 2 30 2 *")


def test_a_one_value_range_with_a_step_is_that_value() -> None:
    # Vixie cron reads "1-1/4" as the one value 1; cronsim before 2.9 read it as "1/4" (1, 5, ...).
    # Only our reading is asserted: the reference's reading of it is its own to change.
    assert parse_cron("1-1/4 * * * *").minutes == (1,)
    assert parse_cron("5-5/10 3-3/2 * * *").minutes == (5,)
