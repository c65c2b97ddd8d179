"""The huey application ``wakeups.py idle`` runs beside idle agents: one task, never queued.

huey_consumer huey_idle.huey -w 3 -k process     (FDCORE_BENCH_HUEY_DB names its SQLite file)
"""

from __future__ import annotations

import os

from huey import SqliteHuey

huey = SqliteHuey(filename=os.environ["FDCORE_BENCH_HUEY_DB"])


@huey.task()
def noop() -> None:
    pass
