"""A mixed fleet with real processes: an agent of the previous release beside a new one still
takes over, and is taken over, at the same bound (issue 20, liveness from the listing).

The previous release is the code before liveness came from the listing: commit
:data:`PREVIOUS` (main before the mailbox index). The test extracts that commit's ``fdcore/``
and every plugin package (``plugins/*/fdcore_*``, ``contrib/*/fdcore_*``) with ``git archive``
into a folder of its own, and starts the old agent with ``python -m fdcore.cli agent run`` and
``PYTHONPATH`` pointing there (and ``PYTHONSAFEPATH``, so that the working directory, this
checkout, does not come first). How the old code loads the old plugins: plugins are found by
their entry points, which come from the installed distributions' metadata (the same names in
both releases), and ``ep.load()`` imports the module an entry point names; the editable installs'
import finders are appended to ``sys.meta_path``, after the ``PYTHONPATH`` entries, so each
import (``fdcore``, ``fdcore_localfs``, ``fdcore_takeover``...) finds the old copy first. The
old agent's log names its version's files, checked below.

The old agent judges a record by its ``updated_at`` (written by the holder's clock, in the
store's time once it measured its clock far off); the new one by the listing's last-modified. On
one machine both say the same: each takes the other's request over within ``stale_after +
grace + one poll`` of its last heartbeat.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_processes_takeover import AGENT, PIPELINE, SLEEPER, TAKEOVER_WITHIN

from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import assert_taken_over, holder

pytestmark = pytest.mark.processes

#: main before the mailbox index and liveness from the listing (issue 20).
PREVIOUS = "dd3cb62972d5990ac300d6e022756452e58db6c5"
REPOSITORY = Path(__file__).resolve().parents[1]

WHERE = "import fdcore, fdcore_takeover as t; print(fdcore.__file__, t.__file__)"


def previous_release(into: Path) -> Path:
    """The previous release's core and plugin packages, side by side in ``into``."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", "--format=tar", PREVIOUS],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the previous release ({PREVIOUS[:7]}) is not in this checkout: {exc}")
    tree = into / "tree"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    packages = into / "packages"
    packages.mkdir()
    (tree / "fdcore").rename(packages / "fdcore")
    for package in [*tree.glob("plugins/*/fdcore_*"), *tree.glob("contrib/*/fdcore_*")]:
        package.rename(packages / package.name)
    return packages


def add(
    fleet: AgentFleet,
    name: str,
    seconds: float,
    old: Path | None = None,
    concurrency: int = 1,
) -> AgentProcess:
    """Start agent ``name`` (of the previous release from ``old``), its tables that long."""
    agent = {**AGENT, "concurrency": concurrency}
    process = fleet.add(name, {"agent": agent, "pipeline": PIPELINE, "runner": SLEEPER})
    process.env = {**fleet.env, "FDCORE_TEST_TABLE_SECONDS": str(seconds)}
    if old is not None:
        process.env["PYTHONPATH"] = f"{old}:{fleet.env.get('PYTHONPATH', '')}"
        # ``python -m`` puts the working directory (this checkout) first on sys.path; not so.
        process.env["PYTHONSAFEPATH"] = "1"
    return process.start()


@pytest.mark.slow
def test_an_agent_of_the_previous_release_takes_over_and_is_taken_over_in_time(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    old = previous_release(tmp_path / "previous")
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    try:
        # The old agent holds r1 and is killed: the new one takes it over.
        first_old = add(fleet, "etl-old", 60, old)
        submit(mailbox, ["sales"], request_id="r1")
        assert wait_until(lambda: holder(mailbox, "r1") == "etl-old", 30), first_old.output()
        new = add(fleet, "etl-new", 60, concurrency=2)
        assert wait_until(lambda: mailbox.agent("etl-new") is not None, 30), new.output()
        first_old.kill()
        taken = assert_taken_over(mailbox, "r1", "etl-old", within=TAKEOVER_WITHIN, timeout=20)
        assert taken.agent == "etl-new"
        # The new agent holds r1 and r2 and is killed: an old agent takes both over.
        submit(mailbox, ["stock"], request_id="r2")
        assert wait_until(lambda: holder(mailbox, "r2") == "etl-new", 30), new.output()
        second_old = add(fleet, "etl-old2", 60, old, concurrency=2)
        assert wait_until(lambda: mailbox.agent("etl-old2") is not None, 30), second_old.output()
        new.kill()
        for request_id in ("r1", "r2"):
            taken = assert_taken_over(
                mailbox, request_id, "etl-new", within=TAKEOVER_WITHIN, timeout=20
            )
            assert taken.agent == "etl-old2"
    finally:
        fleet.stop_all()
    # The old agents ran the previous release's code (its files, not this checkout's).
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import fdcore, fdcore_takeover as t; print(fdcore.__file__, t.__file__)",
        ],
        env=second_old.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(path.startswith(str(old)) for path in where), where


def _state(fleet: AgentFleet, request_id: str) -> State | None:
    found = fleet.mailbox.status(request_id)
    return found.value.state if found is not None else None
