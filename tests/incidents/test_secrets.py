"""A webhook URL set in the environment appears in no log line, file, exception text or command
output: the incidents path is driven through refusals, failures and successes, and everything it
produced is searched for the URL's secret."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fdcore.cli.main import main
from fdcore.contract.layout import status_key
from fdcore.contract.models import State, Status
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins
from fdcore.testing.webhook import Answer, recording_webhook

VARIABLE = "FDCORE_TEST_TEAMS_WEBHOOK"


def test_the_webhook_url_never_leaks(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = f"S3CRET{uuid.uuid4().hex}"
    env = tmp_path / "env"
    storage = load_plugins().open_storage(str(env))
    mailbox = Mailbox(storage)
    for request in ("r-1", "r-2", "r-3"):
        status = Status(request, State.FAILED, datetime.now(timezone.utc), message="boom")
        mailbox.create(status_key(request), status)
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nname = "etl-01"\nenvironment = "{env}"\n[runner]\ncommand = ["true"]\n'
        f'[notify.routes.oncall]\nnotifier = "teams"\nwebhook_env = "{VARIABLE}"\n'
        'retry_for = "1s"\ntimeout = "1s"\n'
    )
    caplog.set_level(logging.DEBUG)
    answers = [Answer(500), Answer(404), Answer(200, delay=5)]
    outputs = []
    with recording_webhook(answers) as server:
        url = server.url(query=f"sig={secret}")
        monkeypatch.setenv(VARIABLE, url)
        for argv in (
            ["incidents", "evaluate", "--config", str(config)],  # 500s, a hang, a 404
            ["notify", "test", "--config", str(config)],  # refused again or posted
            ["incidents", "list", "--env", str(env), "--all", "--json"],
            ["incidents", "show", "inc-0001", "--env", str(env), "--json"],
            ["-v", "incidents", "evaluate", "--config", str(config)],
        ):
            assert main(argv) in (0, 1)  # 1: notify test saw a route fail
            captured = capsys.readouterr()
            outputs.append(captured.out + captured.err)
    monkeypatch.setenv(VARIABLE, f"http://[::1/{secret}")  # malformed: urllib names the URL
    assert main(["notify", "test", "--config", str(config)]) == 1
    captured = capsys.readouterr()
    outputs.append(captured.out + captured.err)

    everything = "\n".join(outputs) + "\n".join(r.getMessage() for r in caplog.records)
    everything += "\n".join(repr(r.exc_info) for r in caplog.records if r.exc_info)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            everything += path.read_text(encoding="utf-8", errors="replace")
    for failure in ("HTTP 500", "HTTP 404", "not posted again", "timed out", "Invalid IPv6 URL"):
        assert failure in everything  # each failure was reported
    assert f"${VARIABLE}" in everything  # by the variable's name
    assert secret not in everything
    assert url not in everything
