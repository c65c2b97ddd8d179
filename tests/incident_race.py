"""One evaluator process of the incident race tests: waits for a shared start time, then opens
(or bumps) the incident ``request_failed:<subject>`` in the environment's incident document.

    python tests/incident_race.py URL SUBJECT START [STORAGE_OPTION=VALUE ...]
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from fdcore.incidents.book import Finding, IncidentBook, report
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins


def race(url: str, subject: str, start: float, options: dict[str, str]) -> None:
    storage = load_plugins().open_storage(url, options)
    book = IncidentBook(Mailbox(storage))
    finding = Finding("request_failed", subject, f"Request {subject} failed")
    time.sleep(max(0.0, start - time.time()))
    book.change(lambda d: report(d, finding, datetime.now(timezone.utc), f"racer-{subject}"))
    storage.close()


def run_racers(url: str, subjects: list[str], options: dict[str, str] | None = None) -> None:
    """Start one process per subject, all writing at the same moment; each must succeed."""
    start = time.time() + 3.0  # after every interpreter has started and imported
    pairs = [f"{k}={v}" for k, v in (options or {}).items()]
    processes = [
        subprocess.Popen([sys.executable, __file__, url, subject, str(start), *pairs])
        for subject in subjects
    ]
    codes = [process.wait(timeout=120) for process in processes]
    assert codes == [0] * len(subjects), codes


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    url, subject, start, *rest = sys.argv[1:]
    race(url, subject, float(start), dict(pair.split("=", 1) for pair in rest))
