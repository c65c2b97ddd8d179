"""``fdcore doctor``: passes on a local folder, catches a broken backend, fails clearly."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from plugin_distributions import install_distribution

from fdcore import hookimpl
from fdcore.abc import Storage, StorageBackend
from fdcore.cli import doctor
from fdcore.cli.main import build_parser, main
from fdcore.errors import StorageUnavailable
from fdcore.plugins.manager import Plugins, load_plugins

pytestmark = pytest.mark.processes


def _names() -> list[str]:
    """Every property doctor reports, in order (what a passing run prints)."""
    return [
        "create-read-delete",
        "replace-etag",
        "stale-etag-refused",
        "absent-key",
        "create-existing-refused",
        "invalid-keys",
        "unusual-keys",
        "distinct-keys",
        "exact-prefix",
        "large-payload",
        "size-bound",
        "read-after-write",
        "list-after-write",
        "list-by-prefix",
        "list-paging",
        "create-if-absent",
        "replace-if-match",
        "delete-if-match",
        "no-lost-updates",
        "no-partial-reads",
        "optional-protocols",
        "versioned-listing",
        "listing-changes",
        "cleanup",
    ]


def _left_in(root: Path) -> list[str]:
    """What doctor left in an environment folder, besides the backend's own ``.fdcore``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".fdcore" not in p.parts)


#: Small races: the CLI's wiring, output and clean-up are what these tests prove; the localfs
#: conformance suite races the same probes in 16 processes over 200 rounds.
SMALL = ["--rounds", "5", "--processes", "4", "--keys", "40"]


@pytest.fixture(scope="module")
def local_doctor(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int, str]:
    """One doctor run (small, --json) on an initialised local folder that holds a request of its
    own, shared by the tests below: the folder, its output, its exit code and the URL."""
    root = tmp_path_factory.mktemp("doctor") / "env"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["init", root.as_uri()]) == 0  # doctor proves an environment; it makes none
    (root / "requests").mkdir()
    (root / "requests" / "r-1.json").write_text("{}")  # the environment's own files stay
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["doctor", str(root), "--json", *SMALL])
    return root, out.getvalue(), code, str(root)


@pytest.mark.slow
def test_doctor_passes_every_line_on_a_local_folder(
    local_doctor: tuple[Path, str, int, str],
) -> None:
    root, out, code, _ = local_doctor
    assert code == 0, out
    properties = json.loads(out)["properties"]
    assert [(p["name"], p["passed"]) for p in properties] == [(n, True) for n in _names()]
    details = {p["name"]: p["detail"] for p in properties}
    assert details["create-if-absent"] == "4 processes x 5 rounds, exactly one winner each"
    assert _left_in(root) == ["requests", "requests/r-1.json"]


def test_doctor_json(local_doctor: tuple[Path, str, int, str]) -> None:
    _, out, _, url = local_doctor
    report = json.loads(out)
    assert report["environment"] == url
    assert report["passed"] is True
    assert report["seconds"] > 0
    assert all(set(p) == {"name", "passed", "detail"} for p in report["properties"])


def test_doctor_defaults_race_16_processes_over_50_rounds() -> None:
    args = build_parser().parse_args(["doctor", "file:///srv/fd"])
    assert (args.rounds, args.processes, args.keys, args.threads) == (50, 16, 500, 8)


BROKEN_BACKEND = '''
    """A backend whose create overwrites instead of refusing: what doctor exists to catch."""
    import os
    from pathlib import Path

    from fdcore import hookimpl
    from fdcore_localfs.store import LocalFolderStorage


    class OverwritingStorage(LocalFolderStorage):
        def create(self, key, data):
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch, etag = self._write_scratch(data)
            os.replace(scratch, path)  # last writer wins; never AlreadyExists
            return etag


    class BrokenBackend:
        name = "broken"

        def accepts(self, url):
            return url.startswith("broken://")

        def open(self, url, options):
            return OverwritingStorage(Path(url.removeprefix("broken://")), url=url)


    @hookimpl
    def fdcore_storage_backends():
        return [BrokenBackend()]
'''


def _install_broken_backend(site: Path) -> dict[str, str]:
    """Install the backend as a real distribution with an entry point, visible via PYTHONPATH."""
    return install_distribution(site, "fdcore-broken", "fdcore_broken", BROKEN_BACKEND)


def _failing_doctor(env: dict[str, str], *argv: str) -> tuple[list[str], dict[str, str]]:
    """Run doctor in a process with ``env``; it must exit 1. Its lines, and the failed ones by
    property."""
    done = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", "doctor", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0].split()[1] for line in lines] == _names()
    failed = {line.split(":")[0].split()[1]: line for line in lines if line.startswith("FAIL")}
    return lines, failed


def test_doctor_fails_on_a_backend_whose_create_overwrites(tmp_path: Path) -> None:
    env = _install_broken_backend(tmp_path / "site")
    root = tmp_path / "env"
    argv = [f"broken://{root}", "--rounds", "2", "--processes", "2", "--keys", "20"]
    lines, failed = _failing_doctor(env, *argv)
    # Its create also skips the store clock it inherits: honest third and fourth failures (after
    # a create the clock still tells the time of an earlier write, not the listed one's).
    assert set(failed) == {
        "create-existing-refused",
        "create-if-absent",
        "optional-protocols",
        "versioned-listing",
    }
    assert "last_write_time() after a create gave None" in failed["optional-protocols"]
    assert "the store clock stamped its write" in failed["versioned-listing"]
    assert "second create succeeded, expected AlreadyExists" in failed["create-existing-refused"]
    assert "FAIL create-if-absent: observed round 0: 2 winners" in failed["create-if-absent"]
    assert lines[-1].startswith("PASS cleanup: removed")
    assert _left_in(root) == []


def _broken_localfs_backend(scheme: str, broken: str) -> str:
    """The source of a backend serving ``<scheme>://<folder>``: a local folder wrapped in the
    broken store ``broken`` of fdcore.testing.broken."""
    return f'''
    from pathlib import Path

    from fdcore import hookimpl
    from fdcore.testing.broken import {broken}
    from fdcore_localfs.store import LocalFolderStorage


    class BrokenBackend:
        name = "{scheme}"

        def accepts(self, url):
            return url.startswith("{scheme}://")

        def open(self, url, options):
            root = Path(url.removeprefix("{scheme}://"))
            return {broken}(LocalFolderStorage(root, url=url))


    @hookimpl
    def fdcore_storage_backends():
        return [BrokenBackend()]
'''


def _doctor_around(tmp_path: Path, scheme: str, broken: str) -> tuple[list[str], dict[str, str]]:
    """Doctor (small rounds, pages of 10) in a process on a local folder wrapped in ``broken``,
    installed as a real distribution: it fails, and leaves nothing behind."""
    package = f"fdcore_{scheme.replace('-', '_')}"
    source = _broken_localfs_backend(scheme, broken)
    env = install_distribution(tmp_path / "site", package.replace("_", "-"), package, source)
    root = tmp_path / "env"
    root.mkdir()
    argv = [f"{scheme}://{root}", "--rounds", "2", "--processes", "2", "--keys", "20"]
    lines, failed = _failing_doctor(env, *argv, "--page-size", "10")
    assert _left_in(root) == []
    return lines, failed


@pytest.mark.slow
def test_doctor_fails_a_listing_that_matches_prefixes_like_sql_like(tmp_path: Path) -> None:
    """A listing that is SQL LIKE 'prefix%': the bug the suite once missed."""
    lines, failed = _doctor_around(tmp_path, "like", "LikeListing")
    assert set(failed) == {"exact-prefix"}, failed
    assert "list of prefix 'a' gave ['A/B.json', 'A/b/y', 'a%b/x'" in failed["exact-prefix"]
    assert "also gave ['A/B.json', 'A/b/y']" in failed["exact-prefix"]
    paging = lines[_names().index("list-paging")]
    assert paging.startswith("PASS list-paging: 21 keys listed over 3 pages of 10"), paging


@pytest.mark.slow
def test_doctor_fails_a_versioned_listing_with_stale_etags(tmp_path: Path) -> None:
    """A versioned listing that keeps the first etag it listed for each key."""
    _, failed = _doctor_around(tmp_path, "stale-versions", "StaleListedEtag")
    assert set(failed) == {"versioned-listing"}, failed
    assert "versions/a.json' was listed with etag" in failed["versioned-listing"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "nosuch://x",
            "fdcore: error: no installed plugin provides a storage backend for 'nosuch://x' "
            "(fdcore doctor URL; installed: ",
        ),
        ("file://otherhost/x", "fdcore: error: file://otherhost/x: a file:// URL must name"),
    ],
)
def test_doctor_config_errors_are_one_line(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", url]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(message)
    assert captured.err.count("\n") == 1


def test_doctor_refuses_a_missing_or_unusable_environment_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    for place, problem in (
        (tmp_path / "a-file" / "env", f"{tmp_path / 'a-file'} is a file, not a folder"),
        (tmp_path / "missing", "environment not found: "),
    ):
        assert main(["doctor", str(place)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith("fdcore: error: ") and problem in captured.err
        assert captured.err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing created


class _Unreachable:
    """A backend whose store cannot be reached: what doctor reports as its "open" property."""

    name = "unreachable"

    def accepts(self, url: str) -> bool:
        return url.startswith("unreachable://")

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> Storage:
        raise StorageUnavailable(None, f"{url}: connection refused")

    @hookimpl
    def fdcore_storage_backends(self) -> Sequence[StorageBackend]:
        return [self]


def test_doctor_reports_a_store_it_cannot_reach_as_a_failed_open(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def plugins() -> Plugins:
        return load_plugins(extra=[("unreachable", _Unreachable())])

    monkeypatch.setattr(doctor, "load_plugins", plugins)
    assert main(["doctor", "unreachable://x"]) == 1
    out = capsys.readouterr().out
    assert out == "FAIL open: observed StorageUnavailable: unreachable://x: connection refused\n"


def test_doctor_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "file:///tmp/x", "--option", "no-equals-sign"])
    assert exited.value.code == 2
    assert "expected KEY=VALUE, got 'no-equals-sign'" in capsys.readouterr().err
    assert main(["doctor", "file:///tmp/x", "--rounds", "0"]) == 2
    assert capsys.readouterr().err == (
        "fdcore: error: fdcore doctor: --rounds: must be 1..100000, got 0\n"
    )
