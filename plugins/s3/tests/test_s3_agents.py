"""End to end on the emulator: three real agents on an S3-backed environment.

The agents are fdcore's ``fdcore_fleet`` fixture (docs/plugins.md, "Testing a plugin"); the two
fixtures below put them on the S3 emulator, credentials coming from the environment as boto3's
standard chain reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from fdcore_s3.testing import S3Emulator

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.environment.queue import queue_rows
from fdcore.mailbox.submit import submit
from fdcore.testing.assertions import assert_each_table_succeeded_once, assert_no_double_writers
from fdcore.testing.scenarios import drained, outage_mid_run, takeover_after_sigkill
from fdcore.testing.tables import table_writes

pytestmark = pytest.mark.processes

AGENT = {"poll_seconds": 0.3, "stale_after": 2, "concurrency": 2, "shutdown_grace": 10}
PIPELINE = {"claim": "when_free", "take_over": True, "grace_seconds": 1, "lease_seconds": 2}
WRITER = {"kind": "python", "function": "fdcore.testing.tables:write_table"}
# stale_after + grace + one poll, plus slack: every poll is HTTP round trips to one emulator.
TAKEOVER_WITHIN = 2 + 1 + 0.3 + 2.0


@pytest.fixture
def fdcore_environment(environment_url: str) -> str:
    """fdcore_fleet's agents share a new folder of the session's bucket."""
    return environment_url


@pytest.fixture
def fdcore_storage_options(s3: S3Emulator) -> dict[str, str]:
    return s3.options


@pytest.mark.slow
def test_three_agents_drain_requests_running_no_table_twice(fdcore_fleet: AgentFleet) -> None:
    fleet, mailbox = fdcore_fleet, fdcore_fleet.mailbox
    for n in range(12):
        submit(mailbox, ["sales", "stock"], request_id=f"r{n:02d}")
    for n in range(3):
        fleet.add(f"etl-0{n}", {"agent": AGENT, "pipeline": PIPELINE, "runner": WRITER}).start()
    try:
        assert wait_until(lambda: drained(fleet), 60), Counter(
            row.state for row in queue_rows(mailbox)
        )
    finally:
        codes = fleet.stop_all()
    assert set(codes.values()) == {0}, [agent.output()[-2000:] for agent in fleet]
    rows = queue_rows(mailbox)
    assert len(rows) == 12
    for row in rows:
        assert_each_table_succeeded_once(mailbox, row.id)
    writes = table_writes(fleet)
    accepted = Counter((w.request, w.table) for w in writes if w.rejected is None)
    assert len(accepted) == 24 and set(accepted.values()) == {1}, accepted  # no table ran twice
    assert_no_double_writers(writes)
    assert len({w.agent for w in writes}) > 1  # the work was shared


@pytest.mark.slow
def test_takeover_after_sigkill(fdcore_fleet: AgentFleet) -> None:
    # Each survivor measures its clock against the store's Date headers (whole seconds).
    sections = {"agent": {**AGENT, "concurrency": 1}, "pipeline": PIPELINE, "runner": WRITER}
    takeover_after_sigkill(fdcore_fleet, sections, within=TAKEOVER_WITHIN)


class TestServerRestart:
    """The server killed mid-run (SIGKILL) and started again on the same port a few seconds
    later. moto keeps objects in memory only: the emulator is made durable (a journal of the
    writes it answered, replayed at start, fdcore_s3.testing), as a real store is."""

    @pytest.fixture
    def s3(self) -> Iterator[S3Emulator]:
        """This test's own emulator, in place of the session's: it is killed mid-test."""
        with S3Emulator(durable=True) as emulator:
            emulator.create_bucket("restart")
            yield emulator

    @pytest.fixture
    def environment_url(self, s3: S3Emulator) -> str:
        return s3.url("restart", "env")

    @pytest.mark.slow
    def test_server_restart_mid_run_loses_and_doubles_nothing(
        self, fdcore_fleet: AgentFleet, s3: S3Emulator
    ) -> None:
        sections = {
            "agent": {**AGENT, "stale_after": 20},
            "pipeline": {**PIPELINE, "lease_seconds": 20},
            "runner": WRITER,
        }
        outage_mid_run(fdcore_fleet, sections, down=s3.kill, up=s3.start)
