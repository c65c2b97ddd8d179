"""The build's own scripts: tools/lock.py's merge of resolutions on several Pythons, and
tools/commit_subjects.py's checks of commit subjects (on real git repositories)."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

TOOLS = Path(__file__).parents[1] / "tools"


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = _tool("lock")
subjects = _tool("commit_subjects")


def test_pins_differing_between_pythons_carry_the_range_they_were_resolved_for() -> None:
    resolutions = [
        ("3.10.13", {"attrs": "25.1", "tomli": "2.2", "numpy": "2.2.6"}),
        ("3.11.7", {"attrs": "25.1", "numpy": "2.3.5"}),
        ("3.13.0", {"attrs": "25.1", "numpy": "2.3.5", "audioop-lts": "0.2"}),
    ]
    assert lock.merged(resolutions) == [
        "attrs==25.1",
        'audioop-lts==0.2; python_version >= "3.13"',
        'numpy==2.2.6; python_version < "3.11"',
        'numpy==2.3.5; python_version >= "3.11"',
        'tomli==2.2; python_version < "3.11"',
    ]


def test_one_resolution_gives_plain_pins() -> None:
    assert lock.merged([("3.11.7", {"b": "2", "a": "1"})]) == ["a==1", "b==2"]


def test_the_subject_is_the_first_paragraph_without_comments() -> None:
    assert subjects.subject("# a comment\n\nFix it\n\nWhy.\n") == "Fix it"
    assert subjects.subject("Two lines\nof subject\n\nWhy.") == "Two lines of subject"


@pytest.mark.parametrize(("length", "code"), [(72, 0), (73, 1)])
def test_the_hook_refuses_a_subject_over_72_characters(
    tmp_path: Path, length: int, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("x" * length + "\n\n" + "y" * 200 + "\n")
    assert subjects.main(["message", str(message)]) == code
    assert ("73 characters" in capsys.readouterr().out) == bool(code)


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def commit(folder: Path, subject: str) -> str:
    git(folder, "commit", "-q", "--allow-empty", "--no-verify", "-m", subject)
    return git(folder, "rev-parse", "--short", "HEAD")


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, value in {"NAME": "t", "EMAIL": "t@example.org"}.items():
        monkeypatch.setenv(f"GIT_AUTHOR_{name}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{name}", value)
    folder = tmp_path / "repository"
    git(tmp_path, "init", "-q", str(folder))
    monkeypatch.chdir(folder)
    yield folder


def test_only_commits_after_the_base_are_checked(
    repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(repository, "an old subject that went on and on " * 3)
    base = commit(repository, "the base")
    commit(repository, "short")
    assert subjects.main(["since", base]) == 0
    text = ("a new subject that goes on and on " * 3).strip()
    long = commit(repository, text)
    assert subjects.main(["since", base]) == 1
    out = capsys.readouterr().out
    assert f"{long}'s subject is {len(text)} characters" in out and "1 of 2 commits" in out


def test_a_shallow_clone_without_the_base_checks_the_commits_it_has(
    repository: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = commit(repository, "the base")
    commit(repository, "a new subject that goes on and on " * 3)
    commit(repository, "short")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repository}", str(clone))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(clone)
        assert subjects.main(["since", base]) == 0
    git(tmp_path, "-C", str(clone), "fetch", "-q", "--depth", "2")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(clone)
        assert subjects.main(["since", base]) == 1
    assert "in this shallow clone" in capsys.readouterr().out


def test_outside_a_checkout_nothing_is_checked_and_a_wrong_base_is_named(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(repository, "one")
    assert subjects.main(["since", "0" * 40]) == 1
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert subjects.main(["since", "0" * 40]) == 0
