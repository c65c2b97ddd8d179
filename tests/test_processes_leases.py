"""A lease file deleted by hand while its table runs: never two writers, never a token again."""

from __future__ import annotations

import pytest

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.models import State
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import assert_no_double_writers
from fdcore.testing.tables import table_writes

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.2, "stale_after": 3.0, "concurrency": 1, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "grace_seconds": 1.0, "lease_seconds": 3.0}
WRITER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}


@pytest.mark.slow
def test_a_deleted_lease_file_lets_no_second_writer_in(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    fleet.env["FDCORE_TEST_TABLE_MIN_SECONDS"] = "3"
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "3"
    # Two requests for one table, one per agent: the second waits for the first's lease.
    submit(mailbox, ["sales"], request_id="r1")
    submit(mailbox, ["sales"], request_id="r2")
    for name in ("etl-01", "etl-02"):
        fleet.add(name, {"agent": AGENT, "pipeline": PIPELINE, "runner": WRITER}).start()
    try:
        assert wait_until(lambda: mailbox.storage.read("leases/sales.json") is not None, 20)
        mailbox.storage.delete("leases/sales.json")
        assert wait_until(
            lambda: all(
                mailbox.status(r).value.state is State.SUCCEEDED  # type: ignore[union-attr]
                for r in ("r1", "r2")
            ),
            40,
        ), [fleet.agents[n].output() for n in fleet.agents]
    finally:
        fleet.stop_all()
    writes = [w for w in table_writes(fleet) if w.table == "sales"]
    assert [w.rejected for w in writes] == [None, None], writes
    assert_no_double_writers(writes)
    tokens = sorted(w.token for w in writes)
    assert tokens[0] < tokens[1], tokens  # the generation went on, it did not restart at 1
