"""Objectives: success rate over a window, freshness; judged only from what was read."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.config import load_config
from fdcore.contract.layout import request_key, run_key, status_key
from fdcore.contract.models import Outcome, Request, RunRecord, ScheduleRef, State, Status
from fdcore.errors import ConfigError
from fdcore.incidents.book import IncidentBook
from fdcore.incidents.evaluate import evaluate
from fdcore.mailbox.access import Mailbox
from fdcore.settings.agent_toml import Objective

NOW = datetime(2026, 9, 1, 12, 0, tzinfo=timezone.utc)
SALES_RATE = Objective(table="sales", success_rate=0.9, window=3600.0)
SALES_FRESH = Objective(table="sales", freshness=7200.0)
HOURLY = Objective(schedule="hourly", success_rate=0.5, window=86400.0)


def environment() -> IncidentBook:
    return IncidentBook(Mailbox(MemoryStorage.fresh("objectives")), pause=lambda _s: None)


def ran(
    book: IncidentBook, request: str, ago: float, ok: bool, schedule: str | None = None
) -> None:
    at = NOW - timedelta(seconds=ago)
    ref = ScheduleRef(schedule, "1") if schedule else None
    book.mailbox.create(request_key(request), Request(request, ["sales"], at, schedule=ref))
    state = State.SUCCEEDED if ok else State.FAILED
    book.mailbox.create(status_key(request), Status(request, state, at))
    outcome = Outcome.SUCCEEDED if ok else Outcome.FAILED
    record = RunRecord(request, "sales", "etl-01", 1, 1, at, at, outcome)
    book.mailbox.create(run_key(request, 1, "sales"), record)


def objective_keys(book: IncidentBook) -> list[str]:
    return sorted(i.key for i in book.read().open if i.kind == "objective")


def test_a_success_rate_below_target_opens_and_clears() -> None:
    book = environment()
    for n, ok in enumerate([True, True, False, False]):
        ran(book, f"r-{n}", ago=600 + n, ok=ok)
    ran(book, "r-old", ago=7200, ok=False)  # outside the window
    outcome = evaluate(book, NOW, 60, "etl-01", [SALES_RATE])
    opened = [i for i in outcome.opened if i.kind == "objective"]
    assert [i.key for i in opened] == ["objective:table.sales"]
    assert opened[0].message == "success rate 50% over the last 1h (2 of 4), below 90%"
    later = NOW + timedelta(hours=2)  # the failures left the window
    ran(book, "r-new", ago=-7000, ok=True)
    outcome = evaluate(book, later, 60, "etl-01", [SALES_RATE])
    assert [i.key for i in outcome.resolved] == ["objective:table.sales"]


def test_freshness_for_a_table_and_a_schedules_success_rate() -> None:
    book = environment()
    ran(book, "r-1", ago=3 * 3600, ok=True, schedule="hourly")
    ran(book, "r-2", ago=3600, ok=False, schedule="hourly")
    ran(book, "r-3", ago=1800, ok=False, schedule="hourly")
    evaluate(book, NOW, 60, "etl-01", [SALES_FRESH, HOURLY])
    assert objective_keys(book) == ["objective:schedule.hourly", "objective:table.sales"]
    document = book.read()
    messages = {i.key: i.message for i in document.open}
    assert messages["objective:table.sales"] == "no success in the last 2h"
    assert messages["objective:schedule.hourly"] == (
        "success rate 33% over the last 1d (1 of 3), below 50%"
    )


def test_an_unreadable_run_log_never_resolves_an_objective() -> None:
    book = environment()
    ran(book, "r-1", ago=600, ok=False)
    evaluate(book, NOW, 60, "etl-01", [SALES_RATE])
    ran(book, "r-2", ago=500, ok=True)
    ran(book, "r-3", ago=400, ok=True)
    key = run_key("r-1", 1, "sales")
    found = book.mailbox.storage.read(key)
    assert found is not None
    book.mailbox.storage.replace(key, b"{broken", found.etag)
    outcome = evaluate(book, NOW, 60, "etl-01", [SALES_RATE])
    assert outcome.resolved == [] and objective_keys(book) == ["objective:table.sales"]
    assert any("run log of r-1 unreadable" in p for p in outcome.problems)


def test_an_evaluator_resolves_only_its_own_objectives() -> None:
    book = environment()
    ran(book, "r-1", ago=600, ok=False)
    evaluate(book, NOW, 60, "etl-01", [SALES_RATE])
    evaluate(book, NOW, 60, "etl-02", [])  # an agent without objectives
    assert objective_keys(book) == ["objective:table.sales"]


AGENT = '[agent]\nname = "etl-01"\nenvironment = "memory://x"\n[runner]\ncommand = ["true"]\n'


def test_objectives_in_agent_toml(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        AGENT
        + '[[incidents.objectives]]\ntable = "sales"\nsuccess_rate = 0.9\nwindow = "1h"\n'
        + '[[incidents.objectives]]\nschedule = "hourly"\nfreshness = "2h"\n'
    )
    objectives = load_config(path).incidents.objectives
    assert objectives == (SALES_RATE, Objective(schedule="hourly", freshness=7200.0))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('table = "sales"\nschedule = "h"\nfreshness = "1h"\n', "exactly one of table, schedule"),
        ('table = "sales"\n', "needs success_rate (with window) or freshness"),
        ('table = "sales"\nsuccess_rate = 1.5\n', "success_rate: must be in (0, 1]"),
        ('table = "../x"\nfreshness = "1h"\n', "table: "),
        ('table = "sales"\nfresh = "1h"\n', "did you mean 'freshness'"),
    ],
)
def test_bad_objectives_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(AGENT + "[[incidents.objectives]]\n" + text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert expected in str(info.value) and "[[incidents.objectives]] #1" in str(info.value)
