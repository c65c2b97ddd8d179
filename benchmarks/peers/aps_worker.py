"""One APScheduler 4 worker process of the side-by-side benchmark (``peers.py``).

    python aps_worker.py URL WORKERS

URL is the shared data store's (SQLAlchemy: ``sqlite+aiosqlite:///...`` or
``postgresql+psycopg://...``): a PostgreSQL store shares events through its LISTEN/NOTIFY
broker; SQLite has no broker to share, each scheduler hears only its own events.
"""

from __future__ import annotations

import sys
from typing import Any

from apscheduler import Scheduler, SchedulerRole
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.eventbrokers.local import LocalEventBroker
from apscheduler.eventbrokers.psycopg import PsycopgEventBroker
from sqlalchemy.engine import make_url


def scheduler(url: str, workers: int = 2, role: SchedulerRole = SchedulerRole.both) -> Scheduler:
    """A scheduler on the shared store (the harness queues work through one too)."""
    broker: Any = LocalEventBroker()
    if url.startswith("postgresql"):
        parsed = make_url(url)
        host = parsed.query["host"]
        broker = PsycopgEventBroker(f"host={host} user={parsed.username} dbname={parsed.database}")
    return Scheduler(SQLAlchemyDataStore(url), broker, max_concurrent_jobs=workers, role=role)


if __name__ == "__main__":
    scheduler(sys.argv[1], int(sys.argv[2])).run_until_stopped()
