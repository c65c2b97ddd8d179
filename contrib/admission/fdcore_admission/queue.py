"""The dispatcher's waiting work: rows in SQLite, and a JSON status entry per lane for others.

A row is the queue's truth (queue start, priority, stage, token, arguments, environment) and is
written only by the dispatcher. A status entry (``status/<lane>.json``: pid, heartbeat, stage)
is what other tools read to see who waits where; it is rewritten from the row, never read back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

QUEUED = "queued"
STARTING = "starting"


@attrs.frozen
class Row:
    lane: str
    queued_at: float  # when the work first queued: kept through every return to ``queued``
    priority: int  # higher first; equal priorities by queue start
    stage: str = QUEUED
    token: str | None = None  # set only while ``starting``
    starting_at: float | None = None
    arguments: tuple[str, ...] = ()
    environment: dict[str, str] = attrs.field(factory=dict)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    lane TEXT PRIMARY KEY,
    queued_at REAL NOT NULL,
    priority INTEGER NOT NULL,
    stage TEXT NOT NULL CHECK (stage IN ('queued', 'starting')),
    token TEXT,
    starting_at REAL,
    arguments TEXT NOT NULL,
    environment TEXT NOT NULL
)
"""


class Queue:
    def __init__(
        self,
        folder: str | Path,
        clock: Callable[[], float] = time.time,
        *,
        read_only: bool = False,  # a tool's view: nothing is created or written
    ) -> None:
        self.folder = Path(folder)
        self.clock = clock
        path = self.folder / "queue.sqlite"
        if read_only:
            self.db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None, timeout=5)
        self.db.execute(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def rows(self) -> list[Row]:
        """Every row, in admission order: highest priority, then earliest queue start."""
        cursor = self.db.execute("SELECT * FROM rows ORDER BY priority DESC, queued_at, lane")
        return [_row(values) for values in cursor.fetchall()]

    def get(self, lane: str) -> Row | None:
        values = self.db.execute("SELECT * FROM rows WHERE lane = ?", (lane,)).fetchone()
        return None if values is None else _row(values)

    def put(self, row: Row) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.lane,
                row.queued_at,
                row.priority,
                row.stage,
                row.token,
                row.starting_at,
                json.dumps(list(row.arguments)),
                json.dumps(row.environment),
            ),
        )
        self._write_entry(row)

    def remove(self, lane: str) -> None:
        self.db.execute("DELETE FROM rows WHERE lane = ?", (lane,))
        (self.folder / "status" / f"{lane}.json").unlink(missing_ok=True)

    def heartbeat(self) -> None:
        for row in self.rows():
            self._write_entry(row)

    def _write_entry(self, row: Row) -> None:
        folder = self.folder / "status"
        folder.mkdir(exist_ok=True)
        entry: dict[str, Any] = {
            "lane": row.lane,
            "pid": os.getpid(),  # the dispatcher, which holds the lane while the row waits
            "heartbeat": self.clock(),
            "stage": row.stage,
        }
        scratch = folder / f".{row.lane}.json.tmp"
        scratch.write_text(json.dumps(entry))
        os.replace(scratch, folder / f"{row.lane}.json")


def _row(values: tuple[Any, ...]) -> Row:
    lane, queued_at, priority, stage, token, starting_at, arguments, environment = values
    return Row(
        lane,
        queued_at,
        priority,
        stage,
        token,
        starting_at,
        tuple(json.loads(arguments)),
        json.loads(environment),
    )
