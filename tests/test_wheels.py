"""The wheels built from this checkout, as a user installs them.

Every installed distribution's wheel ships ``py.typed``; and the README's quick start (its ``sh``
block, read from README.md so the two cannot drift) runs as written in a fresh venv and an
empty folder, nothing added before it, its ``pip install`` given the wheels of exactly the
folders it names, with their dependencies from
the package index (or pip's cache). The test skips, saying why, when the index cannot be reached.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
#: Not copied from the checkout's root to build the core's wheel (only ``fdcore/`` and what its
#: pyproject.toml reads are needed); ``build`` and ``*.egg-info`` anywhere: a stale ``build/``
#: would put deleted modules in the wheel.
NOT_BUILT = {".venv", ".git", "build", "dist", "tools", "tests", "benchmarks", "docs"}
NOT_BUILT |= {"plugins", "contrib", "node_modules"}


def distribution_name(folder: Path) -> str:
    with open(folder / "pyproject.toml", "rb") as file:
        name: str = tomllib.load(file)["project"]["name"]
    return name


def installed_distributions() -> list[Path]:
    """The core and every folder under plugins/ and contrib/ whose distribution is installed."""
    folders = [REPO]
    for parent in ("plugins", "contrib"):
        for folder in sorted((REPO / parent).glob("*/pyproject.toml")):
            try:
                importlib.metadata.distribution(distribution_name(folder.parent))
            except importlib.metadata.PackageNotFoundError:
                continue  # the template and the webhook: type-checked and tested, not installed
            folders.append(folder.parent)
    return folders


def _copy(folder: Path, into: Path) -> Path:
    def ignored(path: str, names: list[str]) -> list[str]:
        top = Path(path) == folder
        return [
            name
            for name in names
            if name == "__pycache__" or name.endswith(".egg-info") or (top and name in NOT_BUILT)
        ]

    return Path(shutil.copytree(folder, into / folder.name, ignore=ignored))


def _isolation() -> list[str]:
    """Build with this interpreter's setuptools when it builds wheels itself (70.1 and later,
    the test extra), else in pip's isolated build environment (slower; needs the index)."""
    version = importlib.metadata.version("setuptools").split(".")
    return ["--no-build-isolation"] if tuple(map(int, version[:2])) >= (70, 1) else []


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """A wheel of each installed distribution (folder -> wheel), built with ``pip wheel
    --no-deps`` from a clean copy of its folder, all in one pip run."""
    work = tmp_path_factory.mktemp("wheels")
    folders = installed_distributions()
    copies = [_copy(folder, work / "src" / str(n)) for n, folder in enumerate(folders)]
    out = work / "dist"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", *_isolation()]
    built = subprocess.run(
        [*command, "--wheel-dir", str(out), *map(str, copies)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    by_name = {path.name.split("-")[0]: path for path in out.glob("*.whl")}
    return {
        folder: by_name[re.sub(r"[-_.]+", "_", distribution_name(folder))] for folder in folders
    }


def test_every_wheel_ships_py_typed(wheels: dict[Path, Path]) -> None:
    missing = []
    for wheel in wheels.values():
        names = zipfile.ZipFile(wheel).namelist()
        packages = {name.split("/")[0] for name in names if "/" in name}
        packages = {name for name in packages if not name.endswith(".dist-info")}
        missing += [f"{wheel.name}: {p}/py.typed" for p in packages if f"{p}/py.typed" not in names]
    assert len(wheels) >= 11  # the core and the ten plugins
    assert not missing, "wheels without py.typed: " + ", ".join(missing)


def quick_start() -> str:
    """The ``sh`` block under "## Quick start" in README.md."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert found, "README.md: no sh block under ## Quick start"
    return found.group(1)


def with_wheels(script: str, wheels: dict[Path, Path]) -> tuple[str, list[str]]:
    """``script`` with the folders its ``pip install`` names replaced by their wheels; and the
    distributions it names."""
    lines = script.splitlines()
    index, words = next(
        (n, shlex.split(line)) for n, line in enumerate(lines) if " install " in line
    )
    at = words.index("install") + 1
    folders = [(REPO / word).resolve() for word in words[at:]]
    assert all(folder in wheels for folder in folders), f"not an installed distribution: {words}"
    lines[index] = shlex.join([*words[:at], *(str(wheels[folder]) for folder in folders)])
    return "\n".join(lines) + "\n", [distribution_name(folder) for folder in folders]


def _index_reachable(pip: Path, folder: Path) -> bool:
    probe = subprocess.run(
        [str(pip), "download", "--no-deps", "--quiet", "--dest", str(folder), "pluggy"],
        capture_output=True,
        timeout=120,
    )
    return probe.returncode == 0


@pytest.fixture
def session() -> Iterator[list[int]]:
    """The process groups the test starts; any still there at the end are killed."""
    groups: list[int] = []
    yield groups
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_the_readme_quick_start_runs_from_wheels(
    wheels: dict[Path, Path], tmp_path: Path, session: list[int]
) -> None:
    script, names = with_wheels(quick_start(), wheels)
    assert names == ["fdcore", "fdcore-localfs", "fdcore-claim", "fdcore-takeover"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FDCORE_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    log = tmp_path / "quick-start.log"
    with open(log, "wb") as output:
        shell = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=tmp_path,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the agent it starts in the background: one group to stop
        )
    session.append(shell.pid)
    code = shell.wait(timeout=240)
    said = log.read_text(errors="replace")
    pip = tmp_path / ".venv" / "bin" / "pip"
    if code != 0 and pip.exists() and not _index_reachable(pip, tmp_path / "probe"):
        pytest.skip("the package index cannot be reached: pip cannot install the dependencies")
    assert code == 0, said  # its submit --wait saw the request succeed
    assert "REQUEST" in said and "Traceback" not in said
    # what the table job it wrote did, once per table
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        "customers.csv",
        "sales.csv",
    ]
    assert "etl.py: wrote out/sales.csv" in said

    fdcore = tmp_path / ".venv" / "bin" / "fdcore"
    states: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = subprocess.run(
            [str(fdcore), "queue", "--env", "./fd", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        states = [request["state"] for request in json.loads(listed.stdout)["requests"]]
        if states and all(state in ("succeeded", "failed") for state in states):
            break
        time.sleep(0.2)
    assert states == ["succeeded"], log.read_text(errors="replace")

    os.killpg(shell.pid, signal.SIGTERM)  # what a service manager sends: the agent stops
    deadline = time.monotonic() + 30
    while _alive(shell.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(shell.pid), "the agent did not stop on SIGTERM"
    assert "Traceback" not in log.read_text(errors="replace")
