"""What the peers run for one request: its tables one after another, each one ``table.sh``
process (fdcore's agents run the same script through the command runner).

huey: ``huey_consumer peer_tasks.huey -w 2 -k thread`` (``PEERS_HUEY_DB`` names its SQLite
file). APScheduler 4: ``aps_worker.py`` runs ``peer_tasks:run_request`` and ``peer_tasks:tick``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

TABLE = str(Path(__file__).resolve().parent / "table.sh")


def run_request(request: str, tables: list[str]) -> None:
    for table in tables:
        subprocess.run(["bash", TABLE, request, table], check=True)


def tick() -> None:
    """A shared schedule's run: its slot (the scheduled second) is the request."""
    from apscheduler import current_job

    fire = current_job.get().scheduled_fire_time
    assert fire is not None
    run_request(f"tick-{int(fire.timestamp())}", ["tick"])


def huey_app(database: str) -> tuple[Any, Any]:
    """A huey application on the SQLite file ``database``, and its task queueing a request."""
    from huey import SqliteHuey

    app = SqliteHuey(filename=database)
    return app, app.task(name="run_request")(run_request)


if os.environ.get("PEERS_HUEY_DB"):  # in huey's consumer
    huey, _ = huey_app(os.environ["PEERS_HUEY_DB"])
