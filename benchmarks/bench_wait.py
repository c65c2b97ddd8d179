"""How soon ``fdcore submit --wait`` returns after the request's final status lands
(docs/benchmarks.md, "Waiting for a request").

    .venv/bin/python benchmarks/bench_wait.py [--runs 20] [--azurite]

One real agent with default settings (only its name, environment and a command runner whose
table is ``true``) serves a local folder, or a folder on a local Azurite with ``--azurite``.
Each run is one ``fdcore submit --entities t1 --wait`` process, timed to its final line on
stdout and to its exit, against when the final status landed: the store's last-modified time of
the status file (a file's mtime on a local folder; Azurite's ``Last-Modified``, whole seconds)
and the ``updated_at`` the agent wrote into it (milliseconds, the agent's clock: the same
machine's). Beside each, a ``fdcore show`` of the request is timed from its last line to its
exit: what any command takes to end once it printed. Prints the median and maximum of each.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from fdcore.abc import VersionedListing
from fdcore.cli.fleet import AgentFleet
from fdcore.contract.layout import STATUS, status_key
from fdcore.environment.client import DEFAULT_POLL

CONTAINER = "fdcore-bench"
FIGURES = {
    "line": "final line printed, after the store's last-modified",
    "written": "final line printed, after the status's updated_at",
    "exit": "process exited, after the store's last-modified",
    "show": "for comparison, `fdcore show`: its last line to its exit",
}


@contextlib.contextmanager
def environment(folder: Path, azurite: bool) -> Iterator[str]:
    """A new environment's URL: a local folder, or a folder on an Azurite started here."""
    if not azurite:
        yield (folder / "env").as_uri()
        return
    from fdcore_onelake.testing import Azurite

    with Azurite() as emulator:
        emulator.create_container(CONTAINER)
        # The Azurite account's URL needs no [storage] option: its development key is known.
        yield emulator.url(CONTAINER, f"wait-{uuid.uuid4().hex[:12]}")


def landed(fleet: AgentFleet, request_id: str) -> tuple[datetime, datetime]:
    """When the final status landed: the store's last-modified time, and its ``updated_at``."""
    storage = fleet.mailbox.storage
    assert isinstance(storage, VersionedListing)
    key = status_key(request_id)
    [listed] = [entry for entry in storage.list_versions(STATUS) if entry.key == key]
    found = fleet.mailbox.status(request_id)
    assert found is not None and found.value.state.final, found
    return listed.modified, found.value.updated_at


def measure(runs: int, azurite: bool) -> str:
    folder = Path(tempfile.mkdtemp(prefix="fdcore-bench-wait-"))
    figures: dict[str, list[float]] = {name: [] for name in FIGURES}
    with environment(folder, azurite) as url:
        fleet = AgentFleet(folder, url)
        runner = {"kind": "command", "command": ["true"]}
        fleet.add("etl-01", {"agent": {}, "runner": runner}).start()
        try:
            for n in range(runs):
                request_id = f"r{n:02d}"
                command = [sys.executable, "-m", "fdcore.cli", "submit", "--env", url]
                command += ["--entities", "t1", "--id", request_id, "--wait"]
                lines, printed, returned = run_timed(command)
                assert len(lines) == 2, lines  # the id, then the final line
                modified, written = landed(fleet, request_id)
                figures["line"].append(printed - modified.timestamp())
                figures["written"].append(printed - written.timestamp())
                figures["exit"].append(returned - modified.timestamp())
                # The same process's start-up and exit without a wait, side by side.
                show = [sys.executable, "-m", "fdcore.cli", "show", request_id, "--env", url]
                _, shown, exited = run_timed(show)
                figures["show"].append(exited - shown)
        finally:
            fleet.stop_all()
            fleet.kill_all()
    where = "Azurite" if azurite else "local folder"
    head = f"{where}, {runs} runs of `fdcore submit --wait` (wait poll {DEFAULT_POLL:g} s):"
    return "\n".join([head] + [f"  {FIGURES[name]}: {summary(figures[name])}" for name in FIGURES])


def run_timed(command: list[str]) -> tuple[list[str], float, float]:
    """Run ``command`` (it must succeed): its lines, when its last line came, when it exited."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    lines, printed = [], 0.0
    for line in process.stdout:
        lines.append(line)
        printed = time.time()
    _, err = process.communicate(timeout=120)
    returned = time.time()
    assert process.returncode == 0, (process.returncode, lines, err)
    return lines, printed, returned


def summary(seconds: list[float]) -> str:
    within = sum(1 for value in seconds if value <= DEFAULT_POLL)
    return (
        f"median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s, "
        f"{within}/{len(seconds)} within one wait poll"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--azurite", action="store_true", help="on Azurite, not a local folder")
    args = parser.parse_args()
    print(measure(args.runs, args.azurite))


if __name__ == "__main__":
    main()
