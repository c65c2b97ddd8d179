"""``fdcore monitor`` as a process: its address, its errors, and /metrics against the commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fdcore.cli.main import main


def fdcore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_it_prints_the_address_with_the_token_and_binds_loopback(monitor: Any) -> None:
    assert monitor.token is not None and len(monitor.token) >= 40
    assert monitor.url.startswith("http://127.0.0.1:")
    assert "fdcore monitor" in monitor.get("/")


def test_metrics_match_fdcore_queue_and_agents(monitor: Any, shared_history: Any) -> None:
    history = shared_history
    families = {f.name: f for f in text_string_to_metric_families(monitor.get("/metrics"))}
    queue = json.loads(fdcore("queue", "--env", history.url, "--json").stdout)["requests"]
    agents = json.loads(fdcore("agents", "--env", history.url, "--json").stdout)["agents"]

    def by_state(name: str) -> dict[str, float]:
        return {s.labels["state"]: s.value for s in families[name].samples if s.value}

    assert by_state("fdcore_requests") == Counter(row["state"] for row in queue)
    assert by_state("fdcore_agents") == Counter(row["state"] for row in agents)
    assert by_state("fdcore_agents") == {"live": 1, "lost": 1, "stopped": 1}
    oldest = families["fdcore_queue_oldest_waiting_seconds"].samples[0].value
    waited = (datetime.now(timezone.utc) - history.now).total_seconds()
    assert 30 <= oldest <= 30 + waited  # w1 was created 30 s before the history was written

    samples = families["fdcore_table_run_duration_seconds"].samples
    count = {s.labels["outcome"]: s.value for s in samples if s.name.endswith("_count")}
    total = sum(s.value for s in samples if s.name.endswith("_sum"))
    assert count == {"succeeded": 3, "failed": 1}
    assert total == pytest.approx(sum(history.run_seconds))
    under_five = [
        s.value for s in samples if s.name.endswith("_bucket") and s.labels["le"] == "5.0"
    ]
    assert sum(under_five) == 4  # 1.5, 2, 5 and 0.5 s: every run is <= 5 s

    takeovers = families["fdcore_takeovers"].samples[0]
    lost = families["fdcore_lost_attempts"].samples[0]
    assert takeovers.name == "fdcore_takeovers_total" and takeovers.value == history.takeovers
    assert lost.value == history.lost_attempts
    lost_in_queue = sum(
        1 for row in queue for attempt in row["attempts"] if attempt["outcome"] == "lost"
    )
    assert lost.value == lost_in_queue


def test_a_refused_action_from_another_process_is_403(monitor: Any) -> None:
    request = urllib.request.Request(
        monitor.url + "actions/requests/w1/cancel",
        method="POST",
        headers={"X-Fdcore-Token": "not-the-token"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``fdcore monitor ARGS`` in this process: exit 2 and one line on stderr (returned)."""
    assert main(["monitor", *args]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--port", "70000"], "fdcore monitor: --port: must be 0..65535, got 70000"),
        (["--refresh", "0"], "fdcore monitor: --refresh: must be at least 0.2, got 0"),
        (["--grace", "nan"], "fdcore monitor: --grace: must be a finite number of seconds"),
        (["--host", "192.0.2.1"], "cannot listen on 192.0.2.1:8421"),
    ],
)
def test_bad_options_are_one_line_errors(
    shared_history: Any, capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    assert error in one_line_error(capsys, "--env", shared_history.url, *args)


def test_a_missing_environment_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "nothing").as_uri()
    assert "not found" in one_line_error(capsys, "--env", url, "--port", "0")
    assert not (tmp_path / "nothing").exists()


def test_a_taken_port_is_a_one_line_error(
    monitor: Any, shared_history: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    port = monitor.url.rstrip("/").rpartition(":")[2]
    error = one_line_error(capsys, "--env", shared_history.url, "--port", port)
    assert "cannot listen on 127.0.0.1:" in error
    assert monitor.process.poll() is None  # the first one still serves


def test_the_demo_without_the_monitor_plugin_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "FDCORE_DISABLE_PLUGINS": "monitor"}
    result = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", "demo", "--monitor", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--monitor: needs fdcore monitor: install the fdcore-monitor plugin" in result.stderr


@pytest.mark.slow
def test_the_demo_serves_its_monitor_while_it_runs_and_stops_it(tmp_path: Path) -> None:
    # the demo's shortest run: one agent, one request, a timeout that ends it at once (exit 1)
    args = ["--monitor", "--monitor-port", "0", "--agents", "1", "--requests", "1"]
    args += ["--timeout", "0.5", "--dir", str(tmp_path / "demo")]
    result = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", "demo", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert result.returncode == 1 and "timed out" in result.stderr, result.stderr
    found = re.search(r"open (http://127\.0\.0\.1:\d+/)", result.stdout)
    assert found, result.stdout
    with pytest.raises(urllib.error.URLError):  # the monitor stopped with the demo
        urllib.request.urlopen(found[1], timeout=5)


def test_the_environment_may_come_from_an_agent_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nname = "a"\nenvironment = "{(tmp_path / "prdo").as_uri()}"\n')
    error = one_line_error(capsys, "--config", str(config), "--port", "0")
    assert f"environment not found: {(tmp_path / 'prdo').as_uri()}" in error
    assert not (tmp_path / "prdo").exists()
