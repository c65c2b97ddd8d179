"""One verdict on a lost agent: ``fdcore agents``, the monitor and an incident all ask the
takeover policy the agent's fleet judges by (the one its record names), not one of their own.

A custom policy, ``patient``, judges an agent lost only ten times later than the default
``stale_record`` would: an agent silent for 200 s (stale_after 60, grace 60) is lost by
``stale_record`` and not by ``patient``. Each reader must say what ``patient`` says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fdcore_monitor.actions import Actions
from fdcore_monitor.app import Settings, create_app
from fdcore_monitor.snapshot import Source
from starlette.testclient import TestClient

from fdcore import hookimpl
from fdcore.abc import TakeoverPolicy
from fdcore.cli.main import main
from fdcore.contract.layout import agent_key
from fdcore.contract.models import AGENT_OFFLINE, AgentRecord
from fdcore.environment import Environment
from fdcore.incidents.book import IncidentBook
from fdcore.incidents.evaluate import evaluate
from fdcore.mailbox import verdict
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import Plugins, load_plugins

GRACE = 60.0


class Patient:
    """Lost ten times later than ``stale_record``: past 10 x (stale_after + grace)."""

    name = "patient"

    def is_lost(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> bool:
        if record is None:
            return False
        wait = 10 * (record.stale_after + grace_seconds)
        return now > record.updated_at + timedelta(seconds=wait)


class PatientPlugin:
    @hookimpl
    def fdcore_takeover_policies(self) -> Sequence[TakeoverPolicy]:
        return [Patient()]


@pytest.fixture
def with_patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reader's verdicts see the ``patient`` policy too, as if its plugin were installed."""

    def plugins() -> Plugins:
        return load_plugins(extra=[("patient", PatientPlugin())])

    monkeypatch.setattr(verdict, "load_plugins", plugins)


def write_records(folder: Path, silent_for: float) -> Mailbox:
    """Two agents silent for ``silent_for`` seconds: one judged by ``patient``, one by default."""
    environment = Environment.open(folder.as_uri(), create=True)
    mailbox = environment.mailbox
    seen = datetime.now(timezone.utc) - timedelta(seconds=silent_for)
    for name, policy in (("etl-patient", "patient"), ("etl-default", None)):
        record = AgentRecord(name=name, updated_at=seen, stale_after=60.0, takeover_policy=policy)
        mailbox.create(agent_key(name), record)
    return mailbox


def states_by_command(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    capsys.readouterr()
    assert main(["agents", "--env", folder.as_uri(), "--grace", str(GRACE), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["agents"]
    return {row["name"]: row["state"] for row in rows}


def states_by_monitor(mailbox: Mailbox) -> dict[str, str]:
    settings = Settings(
        source=Source(Environment(mailbox), grace=GRACE),
        environment=mailbox.storage.url,
        actions=Actions(None, "alice"),
        bound_to="127.0.0.1",
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:
        page = http.get("/").text
        metrics = http.get("/metrics").text
    assert "etl-patient" in page and "etl-default" in page
    counts = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("fdcore_agents{")
    }
    return {state: "x" * int(n) for state, n in counts.items() if n}  # state -> how many


def offline_by_incident(mailbox: Mailbox) -> set[str]:
    book = IncidentBook(mailbox)
    evaluate(book, datetime.now(timezone.utc), GRACE, "evaluator")
    return {i.key.partition(":")[2] for i in book.read().open if i.kind == AGENT_OFFLINE}


@pytest.mark.usefixtures("with_patient")
def test_every_reader_judges_an_agent_by_the_policy_its_record_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "env"
    mailbox = write_records(folder, silent_for=200.0)
    # stale_record: lost past 60 + 60 s; patient: only past 1,200 s
    assert states_by_command(folder, capsys) == {"etl-default": "lost", "etl-patient": "stale"}
    assert states_by_monitor(mailbox) == {"lost": "x", "stale": "x"}
    assert offline_by_incident(mailbox) == {"etl-default"}


@pytest.mark.usefixtures("with_patient")
def test_past_the_patient_wait_every_reader_says_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "env"
    mailbox = write_records(folder, silent_for=1300.0)
    assert states_by_command(folder, capsys) == {"etl-default": "lost", "etl-patient": "lost"}
    assert states_by_monitor(mailbox) == {"lost": "xx"}
    assert offline_by_incident(mailbox) == {"etl-default", "etl-patient"}


def test_a_policy_not_installed_judges_nobody_lost_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "env"
    write_records(folder, silent_for=1300.0)
    capsys.readouterr()
    assert main(["agents", "--env", folder.as_uri(), "--grace", str(GRACE), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    states = {row["name"]: row["state"] for row in document["agents"]}
    assert states == {"etl-default": "lost", "etl-patient": "stale"}
    [warning] = document["warnings"]
    assert "'patient'" in warning and "never shown lost" in warning
