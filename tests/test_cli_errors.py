"""Every command, run as a user runs it: bad input is one line on stderr and a non-zero exit, and
nothing is created; a bug is one line naming the file that holds its traceback."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from plugin_distributions import install_distribution

import fdcore.cli.main
from fdcore import __version__
from fdcore.cli.main import BROKEN_PIPE, BUG, ERROR, main

pytestmark = pytest.mark.processes


@attrs.frozen
class Places:
    """Where the commands are pointed: a regular file, a missing folder, an unreadable folder."""

    environments: Path  # the places themselves, and the commands' working folder
    configs: Path  # agent.toml files
    temporary: Path  # the commands' $TMPDIR: a traceback file would land here

    def snapshot(self) -> list[tuple[str, int, bytes | None]]:
        """Every path under ``environments`` with its mode and, for a file, its bytes."""
        found = []
        for path in sorted(self.environments.rglob("*")):
            data = path.read_bytes() if path.is_file() else None
            found.append((str(path.relative_to(self.environments)), path.lstat().st_mode, data))
        return found


@pytest.fixture
def places(tmp_path: Path) -> Iterator[Places]:
    made = Places(tmp_path / "environments", tmp_path / "configs", tmp_path / "tmp")
    for folder in (made.environments, made.configs, made.temporary):
        folder.mkdir()
    (made.environments / "a-file").write_text("not a folder\n")
    unreadable = made.environments / "unreadable"
    unreadable.mkdir()
    unreadable.chmod(0o000)
    try:
        yield made
    finally:
        unreadable.chmod(0o755)


PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2  # linux/prctl.h, capability.h


def _bound_by_permissions() -> None:
    """In the child, before exec: file permissions bind root too, as they bind everyone else.

    Root reads a mode-000 folder through two capabilities; dropping them from the bounding set
    leaves the new program without them (root's inheritable set is empty). Running as another
    user instead would not do here: the interpreter may live under a private /root.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@attrs.frozen
class Case:
    """One bad environment: its URL, and what the error line must say."""

    url: Callable[[Places], str]
    problem: Callable[[Places], str]
    unreadable: bool = False  # only if file permissions bind the command (root: see above)


CASES = {
    "regular file": Case(
        lambda p: (p.environments / "a-file").as_uri(),
        lambda p: f"{p.environments / 'a-file'} is a file, not a folder",
    ),
    "missing folder": Case(
        lambda p: (p.environments / "missing").as_uri(),
        lambda p: f"environment not found: {(p.environments / 'missing').as_uri()} ",
    ),
    "unreadable folder": Case(
        lambda p: (p.environments / "unreadable").as_uri(),
        lambda p: f"folder {p.environments / 'unreadable'}: Permission denied",
        unreadable=True,
    ),
    "unknown URL scheme": Case(
        lambda p: "nosuch://env",
        lambda p: "no installed plugin provides a storage backend for 'nosuch://env'",
    ),
}

AGENT_TOML = """\
[agent]
name = "etl-01"
environment = {url}
poll_seconds = 0.2

[runner]
kind = "command"
command = ["true"]
"""


def _agent_run(places: Places, url: str) -> list[str]:
    config = places.configs / "agent.toml"
    config.write_text(AGENT_TOML.format(url=json.dumps(url)))
    return ["agent", "run", "--config", str(config)]


COMMANDS: dict[str, Callable[[Places, str], list[str]]] = {
    "agent run": _agent_run,
    "submit": lambda places, url: ["submit", "--env", url, "--entities", "sales"],
    "queue": lambda places, url: ["queue", "--env", url],
    "agents": lambda places, url: ["agents", "--env", url],
    "schedules": lambda places, url: ["schedules", "--env", url],
    "retention run": lambda places, url: ["retention", "run", "--env", url],
    "doctor": lambda places, url: ["doctor", url, "--processes", "2", "--rounds", "1"],
}
CREATING = {"init"}  # it creates a missing environment: that is its job
COMMANDS["init"] = lambda places, url: ["init", url]


def run_fdcore(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    bound_by_permissions: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``fdcore ARGS`` in a new process, as a user runs it."""
    root = bound_by_permissions and os.geteuid() == 0
    return subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        preexec_fn=_bound_by_permissions if root else None,
    )


def assert_one_error_line(result: subprocess.CompletedProcess[str], problem: str) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == ERROR, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fdcore: error: "), lines[0]
    assert problem in lines[0], lines[0]


@pytest.mark.parametrize(
    ("command", "case"),
    [
        (command, case)
        for command in COMMANDS
        for case in CASES
        if not (command in CREATING and case == "missing folder")
    ],
)
def test_a_bad_environment_is_one_line_and_nothing_is_created(
    places: Places, command: str, case: str
) -> None:
    bad = CASES[case]
    url = bad.url(places)
    argv = COMMANDS[command](places, url)
    before = places.snapshot()
    env = {**os.environ, "TMPDIR": str(places.temporary)}
    result = run_fdcore(
        *argv, cwd=places.environments, env=env, bound_by_permissions=bad.unreadable
    )
    assert_one_error_line(result, bad.problem(places))
    if case == "missing folder":
        assert f"`fdcore init {url}` creates it (or an agent with `[agent] create = true`)" in (
            result.stderr
        )
    assert places.snapshot() == before
    assert list(places.temporary.iterdir()) == []  # no traceback file: not a bug


def test_init_creates_an_environment_that_submit_and_the_read_only_commands_then_use(
    tmp_path: Path,
) -> None:
    url = (tmp_path / "new" / "env").as_uri()
    created = run_fdcore("init", url)
    assert (created.returncode, created.stdout, created.stderr) == (0, f"{url}: created\n", "")
    again = run_fdcore("init", url)
    assert (again.returncode, again.stdout) == (0, f"{url}: already an environment\n")
    submitted = run_fdcore("submit", "--env", url, "--entities", "sales", "--id", "r-1")
    assert (submitted.returncode, submitted.stdout, submitted.stderr) == (0, "r-1\n", "")
    listed = run_fdcore("queue", "--env", url, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)["requests"]] == ["r-1"]


def test_a_folder_that_holds_no_environment_is_not_one_and_stays_untouched(
    tmp_path: Path,
) -> None:
    """An empty mount point, a folder made by hand, a mistyped path that happens to exist."""
    (tmp_path / "notes.txt").write_text("mine")
    for argv in (
        ("queue", "--env", tmp_path.as_uri(), "--json"),
        ("agents", "--env", tmp_path.as_uri()),
        ("schedules", "--env", tmp_path.as_uri()),
        ("submit", "--env", tmp_path.as_uri(), "--entities", "sales"),
    ):
        result = run_fdcore(*argv)
        assert_one_error_line(result, f"folder {tmp_path} holds none (no .fdcore/)")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_an_agent_creates_its_environment_only_when_told(tmp_path: Path) -> None:
    url = (tmp_path / "env").as_uri()
    config = tmp_path / "agent.toml"
    config.write_text(AGENT_TOML.format(url=json.dumps(url)))
    refused = run_fdcore("agent", "run", "--config", str(config))
    assert_one_error_line(result=refused, problem=f"environment not found: {url}")
    assert not (tmp_path / "env").exists()
    config.write_text(
        AGENT_TOML.format(url=json.dumps(url)).replace(
            "poll_seconds", "create = true\npoll_seconds"
        )
    )
    agent = subprocess.Popen(
        [sys.executable, "-m", "fdcore.cli", "agent", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(300):
            if (tmp_path / "env" / "agents" / "etl-01.json").exists() or agent.poll() is not None:
                break
            time.sleep(0.1)
        assert (tmp_path / "env" / "agents" / "etl-01.json").exists()
    finally:
        agent.terminate()
        assert agent.wait(timeout=30) == 0, agent.stderr.read() if agent.stderr else ""


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("root", "[storage] root: unknown option for the file backend (known: backend)"),
        (
            "backnd",
            "[storage] backnd: unknown option for the file backend; did you mean 'backend'?",
        ),
    ],
)
def test_an_unknown_storage_key_for_a_local_folder_is_one_line_naming_the_file(
    tmp_path: Path, key: str, problem: str
) -> None:
    url = (tmp_path / "env").as_uri()
    assert run_fdcore("init", url).returncode == 0
    config = tmp_path / "agent.toml"
    config.write_text(AGENT_TOML.format(url=json.dumps(url)) + f'\n[storage]\n{key} = "x"\n')
    refused = run_fdcore("agent", "run", "--config", str(config))
    assert_one_error_line(refused, f"{config}: {problem}")
    assert not (tmp_path / "env" / "agents").exists() or not any(
        (tmp_path / "env" / "agents").iterdir()
    )
    evaluated = run_fdcore("incidents", "evaluate", "--config", str(config))
    assert_one_error_line(evaluated, f"{config}: {problem}")
    by_hand = run_fdcore("init", url, "--option", f"{key}=x")  # no file: the URL names the place
    assert_one_error_line(by_hand, f"{url}: {problem}")


INVALID_PLUGIN = """
    from fdcore import hookimpl


    @hookimpl
    def fdcore_storage_backend():  # a typo: the hook is fdcore_storage_backends
        return []
"""


def test_plugins_with_an_invalid_plugin_installed_shows_it(tmp_path: Path) -> None:
    """The one command that shows what is wrong runs (tests/test_plugins_broken.py has more)."""
    env = install_distribution(
        tmp_path, "acme-typo", "acme_typo", INVALID_PLUGIN, entry_point="typo"
    )
    result = run_fdcore("plugins", env=env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("typo "))
    assert "FAILED TO LOAD: unknown hook 'fdcore_storage_backend' (did you mean " in line


def test_simulate_bad_option_is_one_line() -> None:
    result = run_fdcore("simulate", "--agent-skew", "nonsense")
    assert_one_error_line(result, "fdcore simulate: --agent-skew: expected NAME=SECONDS")


# -- a bug ---------------------------------------------------------------------------------------

CRASHING_BACKEND = """
    from fdcore import hookimpl


    class CrashingBackend:
        name = "crashing"

        def accepts(self, url):
            return url.startswith("crash://")

        def open(self, url, options, *, create=True):
            raise RuntimeError("the crashing backend has a bug")


    @hookimpl
    def fdcore_storage_backends():
        return [CrashingBackend()]
"""


def test_a_bug_is_one_line_naming_the_file_that_holds_its_traceback(tmp_path: Path) -> None:
    env = install_distribution(
        tmp_path / "site", "fdcore-crashing", "fdcore_crashing", CRASHING_BACKEND
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env["TMPDIR"] = str(temporary)

    result = run_fdcore("queue", "--env", "crash://x", env=env)
    assert result.returncode == BUG
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    [saved] = temporary.iterdir()
    assert saved.name.startswith("fdcore-traceback-")
    assert line == (
        "fdcore: internal error: RuntimeError: the crashing backend has a bug "
        f"(a bug; the traceback is in {saved}, or run with -v to print it)"
    )
    text = saved.read_text()
    assert text.startswith(f"fdcore {__version__}: fdcore queue --env crash://x\n\n")
    assert "Traceback (most recent call last):" in text
    assert 'fdcore_crashing.py", line' in text
    assert text.rstrip().endswith("RuntimeError: the crashing backend has a bug")

    verbose = run_fdcore("-v", "queue", "--env", "crash://x", env=env)
    assert verbose.returncode == BUG
    assert "Traceback (most recent call last):" in verbose.stderr
    assert 'fdcore_crashing.py", line' in verbose.stderr
    last = verbose.stderr.splitlines()[-1]
    assert last == "fdcore: internal error: RuntimeError: the crashing backend has a bug"
    assert list(temporary.iterdir()) == [saved]  # -v prints it instead of writing another


def test_a_bug_with_nowhere_to_write_its_traceback_prints_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object) -> object:
        raise ZeroDivisionError("division by zero")

    def no_temporary_folder(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fdcore.cli.main, "load_plugins", broken)
    monkeypatch.setattr(tempfile, "mkstemp", no_temporary_folder)
    assert main(["plugins"]) == BUG
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err
    assert err.splitlines()[-1] == "fdcore: internal error: ZeroDivisionError: division by zero"


def test_a_reader_that_went_away_is_not_an_error() -> None:
    read, write = os.pipe()
    os.close(read)  # `fdcore plugins | head -0`: every write meets a closed pipe
    try:
        result = subprocess.run(
            [sys.executable, "-m", "fdcore.cli", "plugins"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (BROKEN_PIPE, "")


def test_a_broken_pipe_that_is_not_stdout_is_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object) -> object:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(fdcore.cli.main, "load_plugins", broken)
    assert main(["-v", "plugins"]) == BUG
    assert capsys.readouterr().err.splitlines()[-1] == (
        "fdcore: internal error: BrokenPipeError: [Errno 32] Broken pipe"
    )
