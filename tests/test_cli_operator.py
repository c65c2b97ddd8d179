"""``fdcore cancel``, ``retry`` and ``show`` as a user runs them: output, ``--json``, and one
line on stderr for each kind of bad input."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from fdcore.cli.main import ERROR, main
from fdcore.contract.layout import status_key
from fdcore.contract.models import Attempt, Outcome, State, Status
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins
from fdcore.terminal import LiveView, Progress
from fdcore.testing.memory_fleet import START

pytestmark = pytest.mark.processes


@pytest.fixture
def env(tmp_path: Path) -> tuple[str, Mailbox]:
    url = (tmp_path / "env").as_uri()
    mailbox = Mailbox(load_plugins().open_storage(url, create=True))
    submit(mailbox, ["a", "b"], request_id="waiting", now=START)
    for request_id, state in (("failed", State.FAILED), ("done", State.SUCCEEDED)):
        submit(mailbox, ["a", "b"], request_id=request_id, now=START)
        attempt = Attempt(1, "etl-01", START, START, Outcome(state.value), "table a failed")
        status = Status(request_id, state, START, "etl-01", attempts=[attempt])
        mailbox.create(status_key(request_id), status)
    return url, mailbox


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["cancel", "nope"], "request 'nope' not found in file://"),
        (["retry", "nope"], "request 'nope' not found"),
        (["show", "nope"], "request 'nope' not found"),
        (["cancel", "../x"], "fdcore cancel: REQUEST: invalid request id '../x'"),
        (["show", "a b"], "fdcore show: REQUEST: invalid request id 'a b'"),
        (["wait", "nope"], "request 'nope' not found"),
        (["wait", "a b"], "fdcore wait: REQUEST: invalid request id 'a b'"),
        (["wait", "done", "--timeout", "0s"], "fdcore wait: --timeout: must be greater than 0"),
        (["cancel", "done"], "request done already ended succeeded; nothing to cancel"),
        (["retry", "done"], "request done is succeeded; only failed, expired or cancelled"),
        (["retry", "waiting"], "request waiting is waiting (not claimed yet); only failed"),
        (["retry", "failed", "--from-table", "zz"], "table 'zz' is not one of request failed's"),
        (["retry", "failed", "--from-table", "../t"], "fdcore retry: --from-table: invalid table"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], env: tuple[str, Mailbox], argv: list[str], problem: str
) -> None:
    url, _ = env
    code, out, err = run(capsys, *argv, "--env", url)
    assert (code, out) == (ERROR, "")
    assert len(err.splitlines()) == 1 and err.startswith("fdcore: error: "), err
    assert problem in err, err


@pytest.mark.parametrize("name", ["cancel", "retry", "show", "wait"])
def test_a_missing_environment_is_one_line_and_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """Like ``queue`` (tests/test_cli_errors.py): these commands never create an environment."""
    missing = tmp_path / "no-such-env"
    code, out, err = run(capsys, name, "r-1", "--env", missing.as_uri())
    assert (code, out) == (ERROR, "")
    assert err.startswith("fdcore: error: environment not found: ") and err.count("\n") == 1
    assert not missing.exists()


def test_queue_shows_a_cancel_its_holder_has_yet_to_honour(
    capsys: pytest.CaptureFixture[str], env: tuple[str, Mailbox]
) -> None:
    url, mailbox = env
    submit(mailbox, ["a"], request_id="held", now=START)
    attempt = Attempt(1, "etl-01", START)
    mailbox.create(
        status_key("held"), Status("held", State.RUNNING, START, "etl-01", attempts=[attempt])
    )
    code, out, _ = run(capsys, "cancel", "held", "--env", url, "--by", "ann")
    assert (code, out) == (
        0,
        "held: cancel recorded; its holder etl-01 stops it at its next poll\n",
    )
    code, out, _ = run(capsys, "queue", "--env", url)
    [line] = [line for line in out.splitlines() if line.startswith("held ")]
    assert "running (cancelling)" in line
    code, out, _ = run(capsys, "queue", "--env", url, "--json")
    rows = {row["id"]: row for row in json.loads(out)["requests"]}
    assert (rows["held"]["cancelled_by"], rows["waiting"]["cancelled_by"]) == ("ann", None)
    code, out, _ = run(capsys, "show", "held", "--env", url, "--json")
    assert json.loads(out)["why"] == "cancelled by ann; its holder etl-01 stops it at its next poll"


def test_cancel_retry_show_with_json(
    capsys: pytest.CaptureFixture[str], env: tuple[str, Mailbox]
) -> None:
    url, mailbox = env
    code, out, _ = run(capsys, "cancel", "waiting", "--env", url, "--by", "ann", "--json")
    cancelled = json.loads(out)
    assert code == 0
    assert (cancelled["state"], cancelled["by"], cancelled["created"]) == ("cancelled", "ann", True)
    code, out, err = run(capsys, "cancel", "waiting", "--env", url, "--reason", "again")
    assert (code, out) == (ERROR, "")
    assert "request waiting already ended cancelled; nothing to cancel" in err

    code, out, _ = run(capsys, "retry", "waiting", "--env", url, "--from-table", "b", "--json")
    retried = json.loads(out)
    assert (code, retried["retry_of"], retried["tables"]) == (0, "waiting", ["b"])
    code, out, _ = run(capsys, "retry", "failed", "--env", url)
    new_id = out.strip()
    assert code == 0 and mailbox.request(new_id) is not None

    code, out, _ = run(capsys, "show", "failed", "--env", url, "--json")
    story = json.loads(out)
    assert (code, story["state"], story["retried_as"]) == (0, "failed", new_id)
    assert story["attempts"][0]["agent"] == "etl-01"
    code, out, _ = run(capsys, "show", new_id, "--env", url)
    assert code == 0
    assert "retry of  failed" in out and "waiting to be claimed" in out
    code, out, _ = run(capsys, "show", "waiting", "--env", url)
    assert "cancel    cancelled by ann at" in out and "retried   as" in out


def test_queue_watch_redraws_in_place_on_a_terminal(env: tuple[str, Mailbox]) -> None:
    """A real pseudo-terminal: the second frame moves the cursor back up over the first."""
    url, _ = env
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fdcore.cli",
            "queue",
            "--env",
            url,
            "--watch",
            "0.2",
            "--count",
            "2",
        ],
        stdout=terminal,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        output += chunk
    assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    os.close(controller)
    text = output.decode()
    first, _, second = text.partition("\x1b[")
    assert "waiting" in first and "failed" in first
    rows = len(first.strip().splitlines())
    assert second.startswith(f"{rows}F\x1b[J")  # up to the frame's first row, clear, redraw
    assert second.count("REQUEST") == 1


def test_queue_watch_prints_each_frame_to_a_pipe(
    capsys: pytest.CaptureFixture[str], env: tuple[str, Mailbox]
) -> None:
    url, _ = env
    code, out, err = run(capsys, "queue", "--env", url, "--watch", "0.01", "--count", "3")
    assert (code, err, out.count("REQUEST"), "\x1b" in out) == (0, "", 3, False)
    code, out, _ = run(capsys, "queue", "--env", url, "--watch", "0.01", "--count", "2", "--json")
    frames = [json.loads(line) for line in out.splitlines()]
    assert [len(frame["requests"]) for frame in frames] == [3, 3]
    code, _, err = run(capsys, "queue", "--env", url, "--watch", "0")
    assert (
        code == ERROR
        and err == "fdcore: error: fdcore queue: --watch: must be at least 0.01, got 0\n"
    )


def test_progress_shows_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown, piped = Terminal(), io.StringIO()
    for stream in (shown, piped):
        progress = Progress(stream)
        progress.update("probe 1 of 2")
        progress.update("probe 2 of 2")
        progress.done()
    assert piped.getvalue() == ""
    assert shown.getvalue() == "\r\x1b[Kprobe 1 of 2\r\x1b[Kprobe 2 of 2\r\x1b[K"
    live = LiveView(Terminal())
    live.show("a\nb")
    live.note("event")
    assert live.stream.getvalue() == "a\nb\n\x1b[2F\x1b[Jevent\na\nb\n"  # type: ignore[attr-defined]
