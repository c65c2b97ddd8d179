"""``fdcore agent run`` with its store's operations counted, poll by poll.

    python benchmarks/counted_agent.py COUNTS agent run --config agent.toml

The agent runs as ``fdcore agent run`` does, over its store wrapped in a counter
(:class:`fdcore.testing.counting.CountingStore`) that also files each call under the folder it
touched (``read agents``, ``list status``...). After every poll one line is appended to the file
``COUNTS``: the time, whether the agent held nothing, the counts so far (since start-up,
everything between two polls, reactions included) and the keys read since the line before. The
difference of two lines is what the agent's store did from one poll to the next.
``bench_fleet.py size`` starts its agents this way.

The store's ``watch`` (inotify on a local folder) is one long call for the process's life,
counted once at start-up: it is no store round trip.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fdcore.agent.core import Agent
from fdcore.cli import runtime
from fdcore.cli.main import main
from fdcore.plugins.storage import open_environment
from fdcore.testing.counting import CountingStore


class FolderCounts(CountingStore):
    """A CountingStore that also counts each call by ``"<call> <folder>"``."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.by_folder: Counter[str] = Counter()
        self.read: list[str] = []  # "<call> <key>" of each read since the last poll's line

    def __getattr__(self, name: str) -> Any:
        counted = super().__getattr__(name)
        if name.startswith("_") or not callable(counted):
            return counted

        def filed(*args: Any, **kwargs: Any) -> Any:
            where = args[0] if args and isinstance(args[0], str) else ""
            self.by_folder[f"{name} {where.split('/')[0]}".strip()] += 1
            if name.startswith("read"):
                self.read.append(f"{name} {where}")
            return counted(*args, **kwargs)

        return filed


def counted(counts: Path) -> None:
    """Wrap the agent's store in a FolderCounts; log its counts after each poll to ``counts``."""
    opened = open_environment
    stores: list[FolderCounts] = []

    def open_counted(*args: Any, **kwargs: Any) -> Any:
        store = FolderCounts(opened(*args, **kwargs))
        stores.append(store)
        return store

    poll = Agent.poll

    def poll_and_log(agent: Agent) -> None:
        poll(agent)
        store = stores[0]
        line = {"time": time.time(), "idle": agent.idle, "calls": dict(store.by_folder)}
        line["read"], store.read = store.read, []
        with open(counts, "a") as handle:
            handle.write(json.dumps(line) + "\n")

    runtime.open_environment = open_counted  # type: ignore[attr-defined]  # as it imported it
    Agent.poll = poll_and_log  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    counted(Path(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
