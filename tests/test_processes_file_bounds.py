"""A real agent with ``[agent] max_file_bytes = 4096`` writes no file its readers would refuse.

Issue 24, item 3, as it was seen: a request of 36 tables with long names; the agent wrote its
status over its own bound, could not read it back, logged ``request big is no longer mine
(status names another agent)`` and the request stayed ``running`` for good. Now it fails at
its claim with a one-line reason, every other request runs, and a table's long output is cut
to what its run record can hold.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit

pytestmark = pytest.mark.processes

BOUND = 4096
TABLES = [f"table-{n:02d}-" + "x" * 91 for n in range(36)]  # the request fits, its status not
#: A table that writes 14 KB to stderr: its run record keeps the end that fits the bound. The
#: table ``loud`` fails with a last line of 12 KB, which becomes its failure message.
NOISY = [
    sys.executable,
    "-c",
    "import os, sys; sys.stderr.write('a line of table output\\n' * 600)\n"
    "if os.environ['FDCORE_TABLE'] == 'loud': sys.stderr.write('why ' * 3000); sys.exit(3)",
]


def test_a_request_too_large_for_the_bound_fails_and_the_rest_runs(
    fdcore_fleet: AgentFleet, tmp_path: Path
) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox  # submitted under the default bound
    submit(mailbox, TABLES, request_id="big")
    submit(mailbox, ["sales", "orders"], request_id="small")
    submit(mailbox, ["stock", "loud"], request_id="fails-loudly")
    agent = fleet.add(
        "etl-01",
        {
            "agent": {"poll_seconds": 0.1, "stale_after": 2.0, "max_file_bytes": BOUND},
            "runner": {"kind": "command", "command": NOISY},
        },
    )
    agent.start()
    try:
        final = wait_until(
            lambda: all(
                (found := mailbox.status(r)) is not None and found.value.state.final
                for r in ("big", "small", "fails-loudly")
            ),
            30,
        )
    finally:
        codes = fleet.stop_all()
    log = agent.output()
    assert final, log[-3000:]
    assert codes == {"etl-01": 0}
    big, small = mailbox.status("big"), mailbox.status("small")
    assert big is not None and small is not None
    assert big.value.state is State.FAILED and big.value.tables_done == []
    assert big.value.message is not None and "\n" not in big.value.message
    assert "over the bound of 4096 bytes (max_file_bytes)" in big.value.message
    assert small.value.state is State.SUCCEEDED
    loud = mailbox.status("fails-loudly")
    assert loud is not None and loud.value.state is State.FAILED  # not running for good
    assert loud.value.tables_done == ["stock"] and loud.value.message is not None
    assert loud.value.message.startswith("its status would be ")
    [record] = [r for r in mailbox.runs("fails-loudly") if r.table == "loud"]
    assert record.exit_code == 3 and record.message and record.message.endswith("...")
    assert "no longer mine" not in log and "Traceback" not in log
    root = tmp_path / "env"
    written = [
        path
        for folder in ("status", "runs", "agents")
        for path in root.rglob(f"{folder}/**/*.json")
    ]
    assert written and all(path.stat().st_size <= BOUND for path in written), [
        (str(path), path.stat().st_size) for path in written if path.stat().st_size > BOUND
    ]
    records = mailbox.runs("small")
    assert len(records) == 2
    assert all(r.output and r.output.endswith("a line of table output\n") for r in records)


def test_submit_refuses_what_the_bound_cannot_hold(fdcore_fleet: AgentFleet) -> None:
    assert fdcore_fleet.mailbox.request("none") is None  # the environment, opened: created
    command = ["submit", "--env", fdcore_fleet.environment, "--id", "big"]
    result = subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *command, "--entities", ",".join(TABLES)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FDCORE_MAX_FILE_BYTES": str(BOUND)},
    )
    assert result.returncode == 2, result
    assert result.stderr.startswith("fdcore: error: request big not submitted: its status would")
    assert len(result.stderr.splitlines()) == 1
    assert fdcore_fleet.mailbox.request("big") is None
