"""Real fleets at size, short form: ``fdcore agent run`` processes on one local folder (6; more
with ``FDCORE_FLEET_SIZE_AGENTS``) drain 10 requests each that share tables; then, idle, an
agent's store operations per poll are the same in that fleet as in the 3 left once the others
stopped.

The full runs (20 agents on a local folder, 8 on Azurite, 1,000 requests, default settings) are
``make bench-fleet``; figures in docs/benchmarks.md, "Real fleets at size". The agents run
through benchmarks/counted_agent.py, which counts their store's calls poll by poll.
"""

from __future__ import annotations

import os

import pytest
from bench_fleet import Place, size_once

pytestmark = pytest.mark.processes

AGENTS = int(os.environ.get("FDCORE_FLEET_SIZE_AGENTS", "6"))
REQUESTS = 10 * AGENTS
# Short polls so the idle phases take seconds; claim when_free spreads the queue over the fleet.
SECTIONS = {
    "agent": {"poll_seconds": 0.2, "stale_after": 1.0, "shutdown_grace": 10},
    "pipeline": {"claim": "when_free"},
}


@pytest.mark.slow
def test_a_fleet_drains_with_one_writer_a_table_and_idle_polls_cost_as_at_three() -> None:
    figures = size_once(
        Place(), AGENTS, REQUESTS, REQUESTS // 2, SECTIONS, idle_polls=4, shrink_to=3, timeout=240
    )
    checked = figures["checked"]
    assert checked.succeeded == REQUESTS
    assert checked.tables_not_once == []  # run records: each table of each request once
    assert checked.claimed_twice == []  # one attempt each: no request held by two agents
    assert checked.writes == 2 * REQUESTS
    assert checked.written_twice == 0 and checked.refused == 0
    assert checked.double_writers == 0  # no two fenced writes of one table overlapped
    at_size, at_three = figures["idle"], figures["idle_shrunk"]
    # The same calls, and no more of any in one poll: nothing an idle poll does grows with
    # the fleet (the change signal's read, the safety net's lists, the sweep's listing of
    # agents/, the heartbeat). A file read for the first time since the window began (a status
    # that became final since the agent last read it) is paid once, not per poll; none but the
    # signal is read twice.
    assert at_size.most == at_three.most, (at_size, at_three)
    assert at_size.median == at_three.median == 1  # the change signal (a heartbeat apart)
    assert at_size.reads_again == at_three.reads_again == 0
