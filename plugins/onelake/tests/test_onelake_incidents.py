"""8 evaluator processes racing on an Azurite-backed incident document (the local folder's twin
is tests/incidents/test_race.py; the racer is tests/incident_race.py)."""

from __future__ import annotations

import pytest
from fdcore_onelake.testing import Azurite
from incident_race import run_racers

from fdcore.incidents.book import IncidentBook
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins

pytestmark = pytest.mark.processes

SECRET_VARIABLE = "FDCORE_TEST_AZURITE_CONNECTION"


@pytest.fixture
def options(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv(SECRET_VARIABLE, azurite.connection_string)  # the racers inherit it
    return {"connection_string_env": SECRET_VARIABLE}


def incidents(url: str, options: dict[str, str]) -> IncidentBook:
    return IncidentBook(Mailbox(load_plugins().open_storage(url, options)))


@pytest.mark.slow
def test_eight_racers_on_one_key_open_exactly_one_incident(
    environment_url: str, options: dict[str, str]
) -> None:
    run_racers(environment_url, ["r-1"] * 8, options)
    document = incidents(environment_url, options).read()
    assert [(i.id, i.key) for i in document.open] == [("inc-0001", "request_failed:r-1")]
    assert document.open[0].count == 1  # one occurrence, however many evaluators saw it


@pytest.mark.slow
def test_eight_racers_on_different_keys_lose_none(
    environment_url: str, options: dict[str, str]
) -> None:
    run_racers(environment_url, [f"r-{n}" for n in range(8)], options)
    document = incidents(environment_url, options).read()
    assert sorted(i.key for i in document.open) == sorted(f"request_failed:r-{n}" for n in range(8))
    assert sorted(i.id for i in document.open) == [f"inc-{n:04d}" for n in range(1, 9)]
