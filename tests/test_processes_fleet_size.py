"""Real fleets at size, short form: 10 ``fdcore agent run`` processes on one local folder drain
100 requests that share 50 tables; then, idle, an agent's store operations per poll are the same
in the 10-agent fleet as in the 3 left once the other 7 stopped.

The full runs (20 agents on a local folder, 8 on Azurite, 1,000 requests, default settings) are
``make bench-fleet``; figures in docs/benchmarks.md, "Real fleets at size". The agents run
through benchmarks/counted_agent.py, which counts their store's calls poll by poll.
"""

from __future__ import annotations

import pytest
from bench_fleet import Place, size_once

# Short polls so the idle phases take seconds; claim when_free spreads the queue over the fleet.
SECTIONS = {
    "agent": {"poll_seconds": 0.2, "stale_after": 1.0, "shutdown_grace": 10},
    "pipeline": {"claim": "when_free"},
}


@pytest.mark.slow
def test_ten_agents_drain_with_one_writer_a_table_and_idle_polls_cost_as_at_three() -> None:
    figures = size_once(Place(), 10, 100, 50, SECTIONS, idle_polls=4, shrink_to=3, timeout=240)
    checked = figures["checked"]
    assert checked.succeeded == 100
    assert checked.tables_not_once == []  # run records: each table of each request once
    assert checked.claimed_twice == []  # one attempt each: no request held by two agents
    assert checked.writes == 200 and checked.written_twice == 0 and checked.refused == 0
    assert checked.double_writers == 0  # no two fenced writes of one table overlapped
    at_ten, at_three = figures["idle"], figures["idle_shrunk"]
    # The same calls, and no more of any in one poll: nothing an idle poll does grows with
    # the fleet (the lists, the sweep's listing of agents/, the heartbeat).
    # A file read for the first time since the window began (a status that became final since
    # the agent last read it) is paid once, not per poll; none is read twice.
    assert at_ten.most == at_three.most, (at_ten, at_three)
    assert at_ten.median == at_three.median == 2  # requests/ and status/ listed (a heartbeat apart)
    assert at_ten.reads_again == at_three.reads_again == 0
