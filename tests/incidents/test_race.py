"""8 evaluator processes racing on one local folder's incident document (Azurite: fdcore-onelake's
tests/test_onelake_incidents.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from incident_race import run_racers

from fdcore.incidents.book import IncidentBook
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins

pytestmark = pytest.mark.processes


def incidents(url: str) -> IncidentBook:
    return IncidentBook(Mailbox(load_plugins().open_storage(url)))


@pytest.mark.slow
def test_eight_racers_on_one_key_open_exactly_one_incident(tmp_path: Path) -> None:
    url = str(tmp_path / "env")
    run_racers(url, ["r-1"] * 8)
    document = incidents(url).read()
    assert [(i.id, i.key) for i in document.open] == [("inc-0001", "request_failed:r-1")]
    assert document.open[0].count == 1  # one occurrence, whoever saw it (8 racers lose none:
    # the test below)


@pytest.mark.slow
def test_eight_racers_on_different_keys_lose_none(tmp_path: Path) -> None:
    url = str(tmp_path / "env")
    run_racers(url, [f"r-{n}" for n in range(8)])
    document = incidents(url).read()
    assert sorted(i.key for i in document.open) == sorted(f"request_failed:r-{n}" for n in range(8))
    assert sorted(i.id for i in document.open) == [f"inc-{n:04d}" for n in range(1, 9)]
