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

from fdcore.cli.fleet import AgentFleet

CLAIMED = re.compile(r": claimed request (\S+)$", re.MULTILINE)
WITHDRAWN = re.compile(r": request (\S+) was archived meanwhile; not claimed$", re.MULTILINE)


class Repeating:
    """Calls ``once()`` in a thread of its own, ``pause`` seconds apart, until stopped (and once
    more then)."""

    pause = 0.1

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def once(self) -> None:
        raise NotImplementedError

    def start(self) -> Repeating:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None and not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.once()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.once()
            time.sleep(self.pause)


class RetentionRacer(Repeating):
    """``fdcore retention run --keep 1s --grace 0`` over and over until stopped."""

    pause = 0.05

    def __init__(self, fleet: AgentFleet) -> None:
        super().__init__()
        self.fleet = fleet
        self.runs = 0
        self.failed = 0  # runs that exited non-zero (a full or read-only mailbox, say)
        self.moved = 0
        self.problems: list[str] = []  # the "problem:" lines the runs printed

    def once(self) -> None:
        command = [sys.executable, "-m", "fdcore", "retention", "run", "--keep", "1s"]
        done = subprocess.run(
            [*command, "--grace", "0", "--env", self.fleet.environment],
            capture_output=True,
            text=True,
            env=self.fleet.env,
        )
        lines = done.stdout.splitlines()
        self.runs += 1
        self.failed += done.returncode != 0
        self.moved += sum(line.endswith(" archived") for line in lines)
        self.problems += [line for line in lines if line.startswith("problem:")]


class ArchiveWatch(Repeating):
    """Every archived file's first content; ``replaced`` lists those that changed or went."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root  # the environment's folder
        self.first: dict[Path, bytes] = {}
        self.replaced: set[Path] = set()

    def once(self) -> None:
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
