"""The dispatcher's waiting work: rows in SQLite, and a JSON status entry per lane for others.

A row is the queue's truth (queue start, priority, stage, token, arguments, environment) and is
written only by the dispatcher. A status entry (``status/<lane>.json``: pid, heartbeat, stage)
is what other tools read to see who waits where; it is rewritten from the row, never read back.

A claim removes its row and records, in the same transaction, when the work queued, was admitted
and was claimed: the queue wait and the admission-to-claim time, kept apart, for the last
``KEPT_CLAIMS`` claims; and the token a driver whose claim reply was lost asks again with.
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
KEPT_CLAIMS = 1000  # the claims whose timings are kept; older ones are dropped


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


@attrs.frozen
class Claim:
    """One claimed admission: its token and the three moments of its way through the queue."""

    lane: str
    token: str
    queued_at: float  # the work's queue start, kept through every return to ``queued``
    admitted_at: float  # the admission (``starting``) this claim took
    claimed_at: float

    @property
    def queue_wait(self) -> float:
        return self.admitted_at - self.queued_at

    @property
    def admission_to_claim(self) -> float:
        return self.claimed_at - self.admitted_at


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

_CLAIMS = """
CREATE TABLE IF NOT EXISTS claims (
    lane TEXT NOT NULL,
    token TEXT NOT NULL,
    queued_at REAL NOT NULL,
    admitted_at REAL NOT NULL,
    claimed_at REAL NOT NULL
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
        self.db.execute(_CLAIMS)

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

    def take(self, row: Row, claimed_at: float) -> Claim:
        """Remove the claimed ``row`` and record its claim, both or neither."""
        assert row.token is not None and row.starting_at is not None
        claim = Claim(row.lane, row.token, row.queued_at, row.starting_at, claimed_at)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?)", attrs.astuple(claim))
            self.db.execute(
                "DELETE FROM claims WHERE rowid <= (SELECT MAX(rowid) FROM claims) - ?",
                (KEPT_CLAIMS,),
            )
            self.db.execute("DELETE FROM rows WHERE lane = ?", (row.lane,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        (self.folder / "status" / f"{row.lane}.json").unlink(missing_ok=True)
        return claim

    def last_claim(self, lane: str) -> Claim | None:
        values = self.db.execute(
            "SELECT * FROM claims WHERE lane = ? ORDER BY rowid DESC LIMIT 1", (lane,)
        ).fetchone()
        return None if values is None else Claim(*values)

    def claims(self) -> list[Claim]:
        """The kept claims, oldest first (none in a queue no dispatcher of this release wrote)."""
        known = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claims'"
        ).fetchone()
        if known is None:
            return []
        return [Claim(*values) for values in self.db.execute("SELECT * FROM claims ORDER BY rowid")]

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
