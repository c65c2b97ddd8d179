"""Retention racing a real fleet, and what the tests read back to judge it (issue 24, item 1).

:class:`RetentionRacer` runs ``fdcore retention run --keep 1s --grace 0`` back to back in a
thread of the test, as an operator's loop would; :class:`ArchiveWatch` keeps the first content
of every file that lands under ``archive/`` and notes any that later changes or disappears;
:func:`claims` counts each request's claims in the agents' own logs (a request is claimed once:
taking one over, or resuming it, is logged apart).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import attrs

from fdcore.cli.fleet import AgentFleet

CLAIMED = re.compile(r": claimed request (\S+)$", re.MULTILINE)
WITHDRAWN = re.compile(r": request (\S+) was archived meanwhile; not claimed$", re.MULTILINE)


@attrs.define
class RetentionRacer:
    """``fdcore retention run --keep 1s --grace 0`` over and over until stopped."""

    fleet: AgentFleet
    runs: int = 0
    failed: int = 0  # runs that exited non-zero (a full or read-only mailbox, say)
    moved: int = 0
    problems: list[str] = attrs.field(factory=list)  # the "problem:" lines the runs printed
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> RetentionRacer:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        command = [sys.executable, "-m", "fdcore", "retention", "run", "--keep", "1s"]
        while not self._stop.is_set():
            done = subprocess.run(
                [*command, "--grace", "0", "--env", self.fleet.environment],
                capture_output=True,
                text=True,
                env=self.fleet.env,
            )
            self.runs += 1
            self.failed += done.returncode != 0
            self.moved += sum(line.endswith(" archived") for line in done.stdout.splitlines())
            self.problems += [
                line for line in done.stdout.splitlines() if line.startswith("problem:")
            ]
            time.sleep(0.05)


@attrs.define
class ArchiveWatch:
    """Every archived file's first content; ``replaced`` lists those that changed or went."""

    root: Path  # the environment's folder
    first: dict[Path, bytes] = attrs.field(factory=dict)
    replaced: set[Path] = attrs.field(factory=set)
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ArchiveWatch:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.look()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.look()
            time.sleep(0.1)

    def look(self) -> None:
        for path in (self.root / "archive").rglob("*.json"):
            try:
                data = path.read_bytes()
            except OSError:  # a read-only or full spell of the fault suite: look again later
                continue
            if self.first.setdefault(path, data) != data:
                self.replaced.add(path)
        self.replaced |= {path for path in self.first if not path.exists()}


def claims(fleet: AgentFleet) -> tuple[Counter[str], Counter[str]]:
    """Each request's claims, and claims withdrawn after a move, from the agents' logs."""
    logs = [agent.output() for agent in fleet]
    claimed = Counter(match for log in logs for match in CLAIMED.findall(log))
    withdrawn = Counter(match for log in logs for match in WITHDRAWN.findall(log))
    return claimed, withdrawn
