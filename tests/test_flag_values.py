"""No value of any number flag of any command is an internal error (invariant 14).

The flags are found in the real ``fdcore`` parser, plugin commands included, never listed by
hand: every one that takes a number or a duration must be declared with
:func:`fdcore.settings.add_flag`, so it is read by the checks agent.toml's values take. Each is
fed hostile values against an environment with a live agent record, a finished request past
its deadline, a host folder; the command runs in this process through ``main()`` (a few run as
real processes below), and must end in one line on stderr naming the flag, or run.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

import fdcore.cli.main
from fdcore.cli.main import BUG, ERROR, build_parser, main
from fdcore.contract.layout import agent_key, request_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, Outcome, Request, State, Status
from fdcore.durations import parse_duration
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins
from fdcore.settings.checks import Check

pytestmark = pytest.mark.processes

HOSTILE = (
    "nan",
    "inf",
    "-inf",
    "1e308",
    "-1",
    "0",
    "99999999999999999999",
    "99999999999999999999d",
    "",
    "garbage",
    "1" * 5000,  # more digits than Python turns into an int
)


@attrs.frozen
class Flag:
    command: tuple[str, ...]  # ("retention", "run")
    action: argparse.Action

    @property
    def name(self) -> str:
        return self.action.option_strings[-1] if self.action.option_strings else self.action.dest

    def argv(self, base: list[str], value: str) -> list[str]:
        if self.action.option_strings:
            return [*self.command, *base, f"{self.name}={value}"]
        return [*self.command, *base, "--", value]  # a positional, even one like "-1"


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Flag]:
    """Every argument of ``parser`` and of its subcommands, with the command it belongs to."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*path, name))
        else:
            yield Flag(path, action)


def numeric(text: object) -> bool:
    """Whether a text default reads as a number or a duration (``"60"``, ``"7d"``)."""
    if not isinstance(text, str):
        return False
    for read in (float, parse_duration):
        try:
            read(text)
        except ValueError:
            continue
        return True
    return False


def test_every_number_flag_is_declared_with_the_one_reader() -> None:
    """By construction: a flag read by ``int`` or ``float``, or with a number default and no
    reader, is how ``--grace nan`` once reached the commands."""
    wrong = [
        f"fdcore {' '.join(flag.command)} {flag.name}"
        for flag in walk(build_parser())
        if flag.action.type in (int, float)
        or (
            check_of(flag) is None
            and not isinstance(flag.action.default, bool)
            and (isinstance(flag.action.default, (int, float)) or numeric(flag.action.default))
        )
    ]
    assert not wrong, f"declare these with fdcore.settings.add_flag: {wrong}"
    for flag in number_flags():  # each default is a value its reader takes
        default = flag.action.default
        if isinstance(default, str):
            flag.action.type(default)  # argparse reads a text default as a typed value
        elif default is not None:
            assert check_of(flag).check(default) == default, flag  # type: ignore[union-attr]


def check_of(flag: Flag) -> Check | None:
    """The check a flag declared with ``add_flag`` reads its text by (its ``read``)."""
    check = getattr(flag.action.type, "__self__", None)
    return check if isinstance(check, Check) else None


def number_flags() -> list[Flag]:
    return [flag for flag in walk(build_parser()) if check_of(flag) is not None]


def test_the_walk_finds_the_flags_of_fdcore_and_of_its_plugins() -> None:
    found = {(flag.command, flag.name) for flag in number_flags()}
    assert {
        (("queue",), "--grace"),
        (("agents",), "--grace"),
        (("incidents", "evaluate"), "--grace"),
        (("retention", "run"), "--grace"),
        (("retention", "run"), "--keep"),
        (("host", "set-slots"), "count"),  # fdcore-hostslots
        (("monitor",), "--refresh"),  # fdcore-monitor
        (("simulate",), "--max-hours"),
    } <= found


@attrs.frozen
class Places:
    url: str  # an environment with a live agent and a finished request past its deadline
    host: Path  # a host folder whose capacity.json is a folder
    full: Path  # a folder that is not empty (``demo --dir``)


def make_environment(root: Path) -> str:
    url = (root / "env").as_uri()
    mailbox = Mailbox(load_plugins().open_storage(url, create=True))
    now = datetime.now(timezone.utc)
    hour = timedelta(hours=1)
    mailbox.create(agent_key("a1"), AgentRecord(name="a1", updated_at=now, stale_after=60.0))
    mailbox.create(
        request_key("r1"),
        Request(id="r1", entities=["t1"], created_at=now - 3 * hour, deadline=now - 2 * hour),
    )
    attempt = Attempt(1, "a1", now - 3 * hour, now - hour, Outcome.SUCCEEDED)
    status = Status("r1", State.SUCCEEDED, now - hour, "a1", attempts=[attempt], tables_done=["t1"])
    mailbox.create(status_key("r1"), status)
    return url


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Places:
    root = tmp_path_factory.mktemp("flags")
    url = make_environment(root)
    assert main(["host", "init", "--host", str(root / "host")]) == 0
    (root / "host" / "capacity.json").unlink()
    (root / "host" / "capacity.json").mkdir()
    (root / "full").mkdir()
    (root / "full" / "something").write_text("x")
    return Places(url, root / "host", root / "full")


def base_arguments(command: tuple[str, ...], places: Places) -> list[str]:
    """What each command needs besides the flag under test, such that any value the flag
    accepts leaves a run that ends at once."""
    missing = (places.full / "no-environment").as_uri()
    small_run = ["--agents", "1", "--requests", "2", "--table-pool", "1", "--max-tables", "1"]
    bases = {
        ("submit",): ["--env", places.url, "--entities", "t1"],
        ("wait",): ["r1", "--env", places.url],  # r1 ended: a wait returns at once
        ("queue",): ["--env", places.url, "--count", "1"],
        ("agents",): ["--env", places.url],
        ("audit",): ["--env", places.url],
        ("schedules",): ["--env", places.url],
        ("incidents", "evaluate"): ["--env", places.url],
        ("retention", "run"): ["--env", places.url, "--keep", "1s", "--dry-run"],
        ("demo",): ["--dir", str(places.full)],  # not empty: refused after the flags are read
        ("doctor",): [missing, "--rounds", "1", "--processes", "1", "--keys", "1"],
        ("simulate",): [*small_run, "--max-hours", "0.2"],
        ("monitor",): ["--env", missing],  # refused before it would listen
        ("host", "set-slots"): ["--host", str(places.host)],
    }
    if command not in bases:
        raise AssertionError(f"fdcore {' '.join(command)} has number flags: add its base here")
    return bases[command]


@pytest.fixture(scope="module")
def cached_parser() -> Iterator[None]:
    """``main()`` builds its parser (and loads the plugins) per call: build it once here."""
    parser = build_parser()
    saved = fdcore.cli.main.build_parser
    level = logging.getLogger("fdcore").level  # fdcore simulate quietens it: put it back
    fdcore.cli.main.build_parser = lambda plugins=None: parser  # type: ignore[assignment]
    try:
        yield
    finally:
        fdcore.cli.main.build_parser = saved  # type: ignore[assignment]
        logging.getLogger("fdcore").setLevel(level)


@pytest.mark.parametrize("value", HOSTILE, ids=lambda value: value[:24] or "empty")
def test_no_hostile_value_of_any_number_flag_is_an_internal_error(
    places: Places, cached_parser: None, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = []
    for flag in number_flags():
        argv = flag.argv(base_arguments(flag.command, places), value)
        code = main(argv)
        err = capsys.readouterr().err
        if code == BUG or "Traceback" in err or "internal error" in err:
            failures.append(f"fdcore {' '.join(argv)[:120]}: exit {code}: {err[:200]}")
            continue
        try:
            accepted = flag.action.type(value)
        except Exception:  # refused: the command must have said so in one line naming the flag
            lines = err.splitlines()
            if code != ERROR or len(lines) != 1 or f"{flag.name}: " not in lines[0]:
                failures.append(f"fdcore {' '.join(argv)[:120]}: exit {code}: {err[:200]}")
        else:
            assert accepted == accepted, argv  # what a reader accepts is a number, never NaN
    assert not failures, "\n".join(failures)


# -- the cases seen from outside (issue 24, item 5), each failed before --------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "1e308"])
@pytest.mark.parametrize(
    "command",
    [["queue"], ["agents"], ["incidents", "evaluate"], ["retention", "run", "--keep", "1s"]],
)
def test_a_grace_without_meaning_is_one_line_once_an_agent_and_a_request_exist(
    tmp_path: Path, command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_environment(tmp_path)
    assert main([*command, "--env", url, "--grace", value]) == ERROR
    prog = " ".join(word for word in command if not word.startswith("-") and word != "1s")
    assert capsys.readouterr().err == (
        f"fdcore: error: fdcore {prog}: --grace: must be a finite number of seconds, got {value}\n"
        if value != "1e308"
        else f"fdcore: error: fdcore {prog}: --grace: must be at most 3.1536e+08 (10 years), "
        "got 1e+308\n"
    )


def test_a_keep_beyond_any_date_is_one_line_once_a_request_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_environment(tmp_path)
    assert main(["retention", "run", "--env", url, "--keep", "99999999999999999999d"]) == ERROR
    assert capsys.readouterr().err == (
        "fdcore: error: fdcore retention run: --keep: must be greater than 0 and at most "
        "10 years, got 99999999999999999999d\n"
    )
    assert main(["queue", "--env", url]) == 0  # nothing moved
    assert "r1       succeeded" in capsys.readouterr().out


def test_set_slots_where_capacity_json_is_a_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = tmp_path / "host"
    assert main(["host", "init", "--host", str(host)]) == 0
    (host / "capacity.json").unlink()
    (host / "capacity.json").mkdir()
    capsys.readouterr()
    assert main(["host", "set-slots", "2", "--host", str(host)]) == ERROR
    assert capsys.readouterr().err == (
        f"fdcore: error: HOST_SLOT_ERROR: {host}: capacity.json: cannot write (Is a directory)\n"
    )
    assert sorted(path.name for path in host.iterdir() if path.name.startswith(".")) == []


@pytest.mark.parametrize(
    "args",
    [
        ["queue", "--grace", "nan"],
        ["retention", "run", "--keep", "99999999999999999999d"],
        ["agents", "--grace", "1e308"],
    ],
)
def test_as_a_real_process_too(tmp_path: Path, args: list[str]) -> None:
    url = make_environment(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args, "--env", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == ERROR, result
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"fdcore: error: fdcore {args[0]}"), result.stderr
    assert not list(tmp_path.glob("fdcore-traceback-*")), "a traceback was saved"
