"""Run-as and release in every run record: ``fdcore runs`` lists them, and a fleet upgraded
between two attempts of one request shows both releases."""

from __future__ import annotations

import json

import pytest

from fdcore.abc import TableJob
from fdcore.agent.release import release
from fdcore.cli import runs
from fdcore.cli.main import main
from fdcore.environment import Environment, run_story
from fdcore.environment.actions import operator_name
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START, MemoryFleet

TAKE_OVER = {"take_over": True, "stale_after": 10.0, "poll_seconds": 1.0}


def test_an_upgrade_between_attempts_shows_both_releases(
    fdcore_memory_fleet: MemoryFleet,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet = fdcore_memory_fleet  # its store's time is the fleet's clock: etl-01 can go silent
    opened = classmethod(lambda cls, url: cls(fleet.mailbox))
    monkeypatch.setattr(runs.Environment, "open", opened)
    folder = "memory://upgrade"
    old = fleet.agent("etl-01", run_as="svc-etl", **TAKE_OVER)  # type: ignore[arg-type]
    submit(fleet.mailbox, ["sales", "stock"], request_id="r1", now=START)
    old.poll()
    fleet.finish_runs()
    old.poll()  # sales done in attempt 1; stock started, then etl-01 is gone
    assert [run.job.run_as for run in fleet.runs] == ["svc-etl", "svc-etl"]
    upgraded = {**release(), "fdcore": "99.0.0"}
    monkeypatch.setattr("fdcore.agent.tables.release", lambda: upgraded)
    fleet.clock.advance(120)
    new = fleet.agent("etl-02", **TAKE_OVER)  # type: ignore[arg-type]
    for _ in range(3):
        new.poll()
        fleet.finish_runs()
    assert main(["runs", "--env", str(folder), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["runs"]
    shown = [(r["table"], r["attempt"], r["agent"], r["run_as"]) for r in listed]
    assert shown == [("sales", 1, "etl-01", "svc-etl"), ("stock", 2, "etl-02", operator_name())]
    assert [r["release"]["fdcore"] for r in listed] == [release()["fdcore"], "99.0.0"]
    assert all(r["release"]["fdcore-localfs"] for r in listed)  # and each plugin's version
    [second] = [record for record in fleet.mailbox.runs("r1") if record.attempt == 2]
    assert run_story(second).version == "99.0.0" and run_story(second).run_as == operator_name()
    story = Environment(fleet.mailbox).request("r1")
    assert story.release_changes == [f"attempt 2 (etl-02): fdcore {release()['fdcore']} -> 99.0.0"]
    monkeypatch.setattr("fdcore.cli.actions.Environment.open", opened)
    assert main(["show", "--env", folder, "r1"]) == 0
    assert f"release   attempt 2 (etl-02): fdcore {release()['fdcore']}" in capsys.readouterr().out
    assert main(["runs", "--env", str(folder), "--request", "r1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:6] == ["REQUEST", "TABLE", "ATTEMPT", "AGENT", "RUN", "AS"]
    assert "99.0.0" in lines[2] and "svc-etl" in lines[1]


def test_the_runner_gets_run_as_in_its_environment() -> None:
    job = TableJob("r1", "sales", 1, 7, "etl-01", "file:///x", run_as="svc-etl")
    assert job.environ()["FDCORE_RUN_AS"] == "svc-etl"
    assert "FDCORE_RUN_AS" not in TableJob("r1", "sales", 1, 7, "etl-01", "file:///x").environ()
