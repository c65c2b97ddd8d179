"""The monitor's pages, JSON and actions, served in this process over a known history."""

from __future__ import annotations

import json
import math
import re
import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fdcore_monitor.actions import TOKEN_HEADER, Actions
from fdcore_monitor.app import Settings, create_app
from fdcore_monitor.snapshot import Source
from fdcore_monitor.timeline import axis_ticks, timeline_svg
from starlette.testclient import TestClient

from fdcore.cli.main import main
from fdcore.contract.models import State
from fdcore.environment import AttemptStory, Environment, RunStory
from fdcore.environment.views import request_story
from fdcore.incidents.book import IncidentBook

TOKEN = "s3cret-token"
PAGES = ["/", "/queue", "/schedules", "/incidents", "/requests/ok1", "/requests/w1"]


def client(history: Any, token: str | None = TOKEN) -> TestClient:
    settings = Settings(
        source=Source(Environment(history.mailbox)),
        environment=history.url,
        actions=Actions(token, "alice"),
        bound_to="127.0.0.1",
    )
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


def fdcore_json(*args: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, object] = json.loads(result.stdout)
    return document


def test_each_page_shows_the_rows_of_the_commands(history: Any) -> None:
    with client(history) as http:
        agents = http.get("/").text
        assert re.search(r'data-agent="etl-live">.*?state-live">live', agents, re.S)
        assert re.search(r'data-agent="etl-lost">.*?state-lost">lost', agents, re.S)
        assert re.search(r'data-agent="etl-stopped">.*?stopped', agents, re.S)
        assert "1/2" in agents and "box-1" in agents
        queue = http.get("/queue").text
        for request in ("w1", "w2", "run1", "ok1", "bad1", "sched1"):
            assert f'data-request="{request}"' in queue
        assert "failed after 2 lost attempts" in queue
        incidents = http.get("/incidents").text
        assert 'data-incident="inc-0001"' in incidents and "agent etl-lost is offline" in incidents


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("state=waiting", {"w1", "w2"}),
        ("state=active", {"w1", "w2", "run1"}),
        ("state=failed", {"bad1"}),
        ("schedule=nightly", {"sched1"}),
        ("schedule=none&state=succeeded", {"ok1"}),
        ("agent=etl-lost", {"ok1", "bad1"}),
        ("agent=etl-live&state=succeeded", {"ok1", "sched1"}),
        ("q=OK", {"ok1"}),
        ("q=1&schedule=none", {"w1", "run1", "ok1", "bad1"}),
        ("q=nothing-like-it", set()),
    ],
)
def test_the_queue_filters_by_state_and_schedule(history: Any, query: str, shown: set[str]) -> None:
    with client(history) as http:
        page = http.get(f"/queue?{query}").text
        assert set(re.findall(r'data-request="([^"]+)"', page)) == shown
        listed = http.get(f"/api/queue?{query}").json()["requests"]
        assert {row["id"] for row in listed} == shown


def test_the_queue_counts_every_request_by_state_whatever_the_filter(history: Any) -> None:
    counts = {"waiting": 2, "running": 1, "succeeded": 2, "failed": 1}
    with client(history) as http:
        for query in ("", "?state=failed", "?q=w&fragment=1"):
            page = http.get(f"/queue{query}").text
            shown = re.findall(r'data-count="([a-z]+)"[^>]*>[a-z]+ <b>(\d+)</b>', page)
            assert {state: int(n) for state, n in shown} == counts, query
        meta = http.get("/queue?state=active").text
        assert 'data-matching="3"' in meta and "1-3 of 3 matching, newest first." in meta


def test_the_queue_pages_newest_first_keeping_its_filters(
    history: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fdcore_monitor.pages.PAGE_ROWS", 2)
    newest_first = [["w2", "w1"], ["sched1", "run1"], ["ok1", "bad1"]]
    with client(history) as http:
        for number, expected in enumerate(newest_first, start=1):
            page = http.get(f"/queue?page={number}").text
            assert re.findall(r'data-request="([^"]+)"', page) == expected
            assert ('rel="prev"' in page) is (number > 1)
            assert ('rel="next"' in page) is (number < 3)
        middle = http.get("/queue?page=2&schedule=none&q=1").text
        assert re.findall(r'data-request="([^"]+)"', middle) == ["ok1", "bad1"]
        assert 'href="/queue?state=&amp;schedule=none&amp;agent=&amp;q=1&amp;page=1"' in middle
        # past the last page: the last one; not a number: the first
        assert re.findall(r'data-request="([^"]+)"', http.get("/queue?page=99").text) == [
            "ok1",
            "bad1",
        ]
        assert "w2" in http.get("/queue?page=x").text


def test_a_fragment_is_the_live_part_alone(history: Any) -> None:
    with client(history) as http:
        for path in PAGES:
            whole = http.get(path).text
            part = http.get(path, params={"fragment": "1"}).text
            assert "<html" in whole and "<html" not in part and "<nav" not in part
            assert part.strip() and part.strip()[:40] in whole


def test_the_json_is_that_of_the_commands(history: Any) -> None:
    with client(history) as http:
        assert http.get("/api/queue").json() == fdcore_json("queue", "--env", history.url)
        assert http.get("/api/schedules").json() == fdcore_json("schedules", "--env", history.url)
        monitor = http.get("/api/agents").json()
        command = fdcore_json("agents", "--env", history.url)
        assert monitor == command
        assert http.get("/api/nothing").status_code == 404
        story = fdcore_json("show", "ok1", "--env", history.url)
        assert http.get("/api/requests/ok1").json() == story


def test_the_request_page_draws_one_lane_per_agent(history: Any) -> None:
    with client(history) as http:
        page = http.get("/requests/ok1").text
        assert re.findall(r'<g class="lane" data-agent="([^"]+)"', page) == ["etl-lost", "etl-live"]
        assert len(re.findall(r'<g class="run succeeded"', page)) == 2
        assert (
            'class="attempt lost"' in page
            and "failed" not in re.sub(r"\s+", " ", page).split("<svg")[1].split("</svg>")[0]
        )
        waiting = http.get("/requests/w1").text
        assert "No attempt yet" in waiting
        assert http.get("/requests/nope").status_code == 404
        assert http.get("/requests/bad%20id").status_code == 404


def test_a_misnamed_request_is_its_one_line_not_an_internal_error(history: Any) -> None:
    misnamed = b'{"id": "other", "entities": ["a"], "created_at": "2027-01-15T02:00:00Z"}'
    history.mailbox.storage.create("requests/misnamed.json", misnamed)
    says = "requests/misnamed.json: field 'id': 'other' does not match the file name"
    with client(history) as http:
        page = http.get("/requests/misnamed")
        assert page.status_code == 422 and says in page.text
        api = http.get("/api/requests/misnamed")
        assert api.status_code == 422 and api.json() == {"error": says}


def test_the_timeline_of_a_running_attempt_reaches_now() -> None:
    now = datetime(2026, 1, 1, 12, 0, 10, tzinfo=timezone.utc)
    start = now - timedelta(seconds=10)
    attempt = AttemptStory(1, "a<b", start, None, "running", None)
    end = start + timedelta(seconds=5)
    run = RunStory("t1", "a<b", 1, 3, start, end, "succeeded", 0, None, None)
    svg = timeline_svg([attempt], [run], now)
    assert "a&lt;b" in svg and "a<b" not in svg  # names are escaped
    bar = re.search(r'class="attempt running" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    block = re.search(
        r'<g class="run succeeded" data-table="t1"><rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"',
        svg,
    )
    assert bar and block
    # the attempt spans the whole axis (to now); the run, its first half
    assert float(bar[2]) == pytest.approx(2 * float(block[2]), rel=0.01)
    assert re.findall(r'class="axis"[^>]*>([^<]*)<', svg) == [
        "0 s",
        "+2 s",
        "+4 s",
        "+6 s",
        "+8 s",
        "+10 s",
    ]


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        (1.8, ["0 s", "+0.5 s", "+1 s", "+1.5 s"]),  # not +0.5 s, +0.9 s, +1.4 s
        (0.3, ["0 s", "+0.1 s", "+0.2 s", "+0.3 s"]),
        (59, ["0 s", "+20 s", "+40 s"]),
        (600, ["0 s", "+2 min", "+4 min", "+6 min", "+8 min", "+10 min"]),
        (5 * 3600 + 17, ["0 s", "+1 h", "+2 h", "+3 h", "+4 h", "+5 h"]),
    ],
)
def test_the_timeline_axis_reads_round_steps(span: float, labels: list[str]) -> None:
    ticks = axis_ticks(span)
    assert [label for _, label in ticks] == labels
    assert all(0 <= at <= span for at, _ in ticks)


@pytest.mark.parametrize("span", [0.001, 0.37, 1.4, 7.7, 42, 179, 181, 4000, 20000, 3e5])
def test_every_axis_step_is_one_two_or_five_times_a_power_of_ten(span: float) -> None:
    ticks = axis_ticks(span)
    first = float(ticks[1][1].lstrip("+").split()[0])
    mantissa = first / 10 ** math.floor(math.log10(first))
    assert round(mantissa, 6) in (1, 2, 5)
    assert 2 <= len(ticks) - 1 <= 7  # a handful of steps, never one label crowding another


EXTERNAL = re.compile(
    r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//"""
    r"""|url\(\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//|@import|fetch\(\s*["'](?:[a-z]+:)?//"""
    r"""|https?://(?!www\.w3\.org/2000/svg")""",
    re.I,
)


def test_no_served_page_or_asset_references_another_host(history: Any) -> None:
    with client(history) as http:
        served: dict[str, str] = {}
        for path in PAGES:
            for query in ("", "?fragment=1"):
                served[path + query] = http.get(path + query).text
        assets = set()
        for text in served.values():
            assets.update(re.findall(r'(?:src|href)="(/static/[^"]+)"', text))
        assert {"/static/monitor.css", "/static/monitor.js", "/static/favicon.svg"} <= assets
        for asset in assets:
            answer = http.get(asset)
            assert answer.status_code == 200, asset
            served[asset] = answer.text
        found = {path: EXTERNAL.findall(text) for path, text in served.items()}
        assert {path: hits for path, hits in found.items() if hits} == {}
        policy = http.get("/").headers["content-security-policy"]
        assert "default-src 'self'" in policy


def test_a_name_other_than_loopback_is_refused_on_loopback(history: Any) -> None:
    with client(history) as http:
        assert http.get("/", headers={"host": "attacker.example"}).status_code == 400


def test_actions_are_off_without_allow_actions(history: Any) -> None:
    with client(history, token=None) as http:
        assert ">Acknowledge</button>" not in http.get("/incidents").text
        answer = http.post("/actions/incidents/inc-0001/acknowledge", headers={TOKEN_HEADER: "x"})
        assert answer.status_code == 403 and "--allow-actions" in answer.json()["error"]


def test_acknowledge_needs_the_token_and_records_who(
    history: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = "/actions/incidents/inc-0001/acknowledge"
    with client(history) as http:
        assert ">Acknowledge</button>" in http.get("/incidents").text
        assert http.post(path).status_code == 403
        assert http.post(path, headers={TOKEN_HEADER: "wrong"}).status_code == 403
        assert http.get(path).status_code == 405  # an action is never a GET
        assert IncidentBook(history.mailbox).read().open[0].acknowledged_by is None
        caplog.set_level("INFO", logger="fdcore.monitor")
        answer = http.post(path, headers={TOKEN_HEADER: TOKEN})
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"] == "inc-0001 acknowledged by alice"
        incident = IncidentBook(history.mailbox).read().open[0]
        assert incident.acknowledged_by == "alice" and incident.acknowledged_at is not None
        assert "acknowledge inc-0001 by alice from testclient" in caplog.text
        unknown = http.post(
            "/actions/incidents/inc-0099/acknowledge", headers={TOKEN_HEADER: TOKEN}
        )
        assert unknown.status_code == 409 and "inc-0099" in unknown.json()["error"]


def test_cancel_and_retry_need_the_token_and_record_who(history: Any) -> None:
    with client(history) as http:
        page = http.get("/queue").text
        assert 'data-action="/actions/requests/w1/cancel"' in page
        assert 'data-action="/actions/requests/bad1/retry"' in page
        assert 'data-action="/actions/requests/ok1/' not in page  # a success: neither
        cancel = "/actions/requests/w1/cancel"
        assert http.post(cancel, headers={TOKEN_HEADER: "wrong"}).status_code == 403
        assert history.mailbox.cancel("w1") is None
        answer = http.post(cancel, headers={TOKEN_HEADER: TOKEN})
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"] == "w1 cancelled by alice: cancelled"
        story = request_story(history.mailbox, "w1")
        assert story.state == State.CANCELLED.value and story.cancel is not None
        assert story.cancel.by == "alice"
        again = http.post("/actions/requests/ok1/cancel", headers={TOKEN_HEADER: TOKEN})
        assert again.status_code == 409 and "already ended succeeded" in again.json()["error"]

        assert http.post("/actions/requests/bad1/retry").status_code == 403
        retried = http.post("/actions/requests/bad1/retry", headers={TOKEN_HEADER: TOKEN})
        assert retried.status_code == 200, retried.text
        new = retried.json()["message"].rpartition(" as ")[2]
        assert request_story(history.mailbox, "bad1").retried_as == new
        assert http.get(f"/api/requests/{new}").json()["retry_of"] == "bad1"
        assert f'href="/requests/{new}"' in http.get("/requests/bad1").text
        assert http.get("/api/requests/nope").status_code == 404


def test_with_a_host_folder_this_machines_agents_show_its_slots(
    history: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = str(tmp_path / "host")
    assert main(["host", "init", "--host", host]) == 0
    assert main(["host", "set-slots", "3", "--host", host]) == 0
    found = history.mailbox.agent("etl-live")
    found.value.host = socket.gethostname()  # an agent of this machine
    history.mailbox.replace("agents/etl-live.json", found.value, found.etag)
    capsys.readouterr()
    assert main(["agents", "--env", history.url, "--host", host, "--json"]) == 0
    command = json.loads(capsys.readouterr().out)
    settings = Settings(
        Source(Environment(history.mailbox), host=host), history.url, Actions(None, "x"), "::1"
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:
        assert http.get("/api/agents").json() == command
        page = http.get("/").text
    row = re.search(r'data-agent="etl-live">(.*?)</tr>', page, re.S)
    assert row and '<td class="wide">0/3</td>' in row[1]
    assert {a["name"]: a["configured_slots"] for a in command["agents"]} == {
        "etl-live": 3,
        "etl-lost": None,
        "etl-stopped": None,
    }


class RecordingEnvironment(Environment):
    """An Environment that records which of its methods were called (and calls them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.called: set[str] = set()

    def __getattribute__(self, name: str) -> Any:
        found = super().__getattribute__(name)
        if callable(found) and not name.startswith("_"):
            super().__getattribute__("__dict__").setdefault("called", set()).add(name)
        return found


def test_every_read_and_action_goes_through_the_one_environment(history: Any) -> None:
    environment = RecordingEnvironment(history.mailbox)
    settings = Settings(Source(environment), history.url, Actions(TOKEN, "alice"), "127.0.0.1")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:
        for path in [*PAGES, "/metrics", "/api/queue?state=waiting", "/api/incidents"]:
            assert http.get(path).status_code == 200, path
        for action in (
            "requests/w1/cancel",
            "requests/bad1/retry",
            "incidents/inc-0001/acknowledge",
        ):
            answer = http.post(f"/actions/{action}", headers={TOKEN_HEADER: TOKEN})
            assert answer.status_code == 200, answer.text
    assert environment.called >= {
        "queue",
        "agents",
        "request",
        "incidents",
        "table_runs",
        "cancel",
        "retry",
        "acknowledge",
    }


def test_a_schedule_whose_record_names_no_tables_shows_unknown(history: Any) -> None:
    from fdcore.contract.layout import agent_key
    from fdcore.contract.models import ScheduleInfo

    found = history.mailbox.agent("etl-live")
    assert found is not None
    found.value.schedules = [ScheduleInfo("hourly", shared=True, when="every 3600s")]
    history.mailbox.replace(agent_key("etl-live"), found.value, found.etag)
    with client(history) as http:
        page = http.get("/schedules").text
    assert re.search(r'data-schedule="hourly">.*?<td class="wide">unknown</td>', page, re.S)


def test_the_agents_page_shows_each_agents_owner_and_last_jobs(history: Any) -> None:
    from fdcore.contract.layout import agent_key
    from fdcore.contract.models import LastJob, Outcome

    found = history.mailbox.agent("etl-live")
    assert found is not None
    found.value.owner = "data team"
    found.value.last_jobs = [LastJob("ok1", "b", Outcome.SUCCEEDED, history.now)]
    history.mailbox.replace(agent_key("etl-live"), found.value, found.etag)
    with client(history) as http:
        page = http.get("/").text
    live = re.search(r'data-agent="etl-live">(.*?)</tr>', page, re.S)
    lost = re.search(r'data-agent="etl-lost">(.*?)</tr>', page, re.S)
    assert live and lost
    assert '<td class="owner">data team</td>' in live[1]
    assert re.search(r'href="/requests/ok1"[^>]*>ok1/b</a> <span[^>]*>succeeded', live[1])
    assert '<td class="owner">-</td>' in lost[1]  # a record without an owner


def test_a_request_page_shows_a_release_change_between_attempts(history: Any) -> None:
    from fdcore.contract.layout import run_key

    found = [r for r in history.mailbox.runs("ok1")]
    for record in found:  # attempt 1 by etl-lost, attempt 2 by etl-live: an upgrade between
        record.release = {"fdcore": f"0.{record.attempt}.0", "fdcore-localfs": "0.1.0"}
        key = run_key(record.request, record.attempt, record.table)
        blob = history.mailbox.storage.read(key)
        history.mailbox.replace(key, record, blob.etag)
    with client(history) as http:
        page = http.get("/requests/ok1").text
    assert re.search(
        r"Release changed</dt><dd[^>]*>attempt 2 \(etl-live\): fdcore 0\.1\.0 -&gt; 0\.2\.0", page
    )


def test_the_audit_trail_is_read_at_page_load_not_at_each_refresh(history: Any) -> None:
    environment = Environment(history.mailbox)
    environment.cancel("w1", by="ann")
    with client(history) as http:
        assert re.search(
            r'data-audit="audit/[^"]+" class="trusted">.*?cancel.*?ann',
            http.get("/requests/w1").text,
            re.S,
        )
        assert "Audit trail" not in http.get("/requests/w1?fragment=1").text


def test_a_request_page_shows_what_its_runs_cost_read_at_page_load(history: Any) -> None:
    from fdcore.contract.layout import run_key

    found = history.mailbox.runs("ok1")
    for n, record in enumerate(found):  # as a counting agent with a compute rate writes them
        record.operations = {"read": 4, "create": 1, "replace": 2 + n}
        record.compute_per_hour = 36.0
        key = run_key(record.request, record.attempt, record.table)
        blob = history.mailbox.storage.read(key)
        history.mailbox.replace(key, record, blob.etag)
    report = Environment(history.mailbox).cost(request="ok1", by="run")
    operations = 7 * len(found) + sum(range(len(found)))
    assert report.total.total_operations == operations
    with client(history) as http:
        page = http.get("/requests/ok1").text
        assert f'<dd id="cost-operations">{operations} (' in page
        # each run's own, in the table of runs: they add up to the request's
        cells = re.findall(r'<td class="wide store-ops">(\d+)</td>', page)
        assert sorted(map(int, cells)) == [7 + n for n in range(len(found))]
        assert f'<dd id="cost-total">${report.total.dollars:.6f}</dd>' in page
        assert report.total.compute_dollars > 0  # 36 $/h over the runs' wall time
        assert "Cost" not in http.get("/requests/ok1?fragment=1").text
