"""A request whose id differs from its file name, and a garbage cancel, with a real agent and the
real ``fdcore queue`` and ``fdcore show`` (issue 24, item 6).

Seen before: the misnamed request was listed ``waiting`` for ever with no word; a garbage
``cancels/<id>.json`` held its request back for ever while ``fdcore queue`` showed it
``waiting``. Now the misnamed file is reported once (naming the file and field ``id``), never
claimed, and shown ``unreadable``; the garbage cancel is reported once and is no cancel: the
request runs, and the queue and ``show`` name the bad file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.layout import request_key
from fdcore.contract.models import Request, State
from fdcore.mailbox.submit import submit

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.1, "stale_after": 3.0}
SLEEPER = {"kind": "python", "function": "fdcore.testing.tables:sleep_table"}
MISNAMED = b'{"id": "other", "entities": ["sales"], "created_at": "2027-01-15T02:00:00Z"}'


def fdcore(fleet: AgentFleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args, "--env", fleet.environment],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_a_misnamed_request_is_a_problem_and_a_garbage_cancel_is_no_cancel(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    root = tmp_path / "env"  # the fdcore_environment fixture's folder
    (root / "requests").mkdir(exist_ok=True)
    (root / "requests/misnamed.json").write_bytes(MISNAMED)
    submit(mailbox, ["sales"], request_id="garbled")
    (root / "cancels").mkdir(exist_ok=True)
    (root / "cancels/garbled.json").write_bytes(b"{not json")
    submit(mailbox, ["stock"], request_id="good")
    agent = fleet.add("etl-01", {"agent": AGENT, "runner": SLEEPER})
    agent.start()
    try:

        def ended(request_id: str) -> bool:
            found = mailbox.status(request_id)
            return found is not None and found.value.state.final

        assert wait_until(lambda: ended("good") and ended("garbled"), 30), agent.output()[-2000:]
        status = mailbox.status("garbled")
        assert status is not None and status.value.state is State.SUCCEEDED  # it ran
        assert mailbox.storage.read("status/misnamed.json") is None  # never claimed
        queue = fdcore(fleet, "queue", "--json")
        assert queue.returncode == 0, queue.stderr
        rows = {row["id"]: row for row in json.loads(queue.stdout)["requests"]}
        assert rows["misnamed"]["state"] == "unreadable"
        assert rows["misnamed"]["message"] == (
            "requests/misnamed.json: field 'id': 'other' does not match the file name"
        )
        assert rows["garbled"]["state"] == "succeeded"
        shown = fdcore(fleet, "show", "misnamed")
        assert shown.returncode == 2 and shown.stderr.count("\n") == 1, shown
        assert "requests/misnamed.json: field 'id': 'other' does not match" in shown.stderr
        story = fdcore(fleet, "show", "garbled", "--json")
        assert story.returncode == 0, story.stderr
        problems = json.loads(story.stdout)["problems"]
        assert len(problems) == 1
        assert problems[0].startswith("not a cancel: cancels/garbled.json: not valid JSON")
        # An operator's cancel of a request whose cancel file is garbage replaces it.
        later_request = Request("later", ["orders"], datetime.now(timezone.utc), affinity="nobody")
        mailbox.create(request_key("later"), later_request)  # for no running agent: it waits
        (root / "cancels/later.json").write_bytes(b"[]")
        waiting = {
            r["id"]: r for r in json.loads(fdcore(fleet, "queue", "--json").stdout)["requests"]
        }
        assert waiting["later"]["state"] == "waiting"
        assert waiting["later"]["cancel_problem"].startswith("cancels/later.json: ")
        human = fdcore(fleet, "queue")
        assert "Not a cancel: cancels/later.json: " in human.stdout + human.stderr
        assert fdcore(fleet, "cancel", "later").returncode == 0
        later = mailbox.status("later")
        assert later is not None and later.value.state is State.CANCELLED
    finally:
        codes = fleet.stop_all()
    assert codes == {"etl-01": 0}
    output = agent.output()
    assert "Traceback" not in output
    misnamed = [line for line in output.splitlines() if "skipping requests/misnamed.json" in line]
    assert len(misnamed) == 1 and "field 'id': 'other' does not match the file name" in misnamed[0]
    garbled = [line for line in output.splitlines() if "skipping cancels/garbled.json" in line]
    assert len(garbled) == 1 and "not valid JSON" in garbled[0]
