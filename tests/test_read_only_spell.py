"""A mailbox that refuses writes for a while loses no request (docs/takeover.md).

Every agent's record goes stale while the store refuses writes. Once writes land again an agent
that takes a request over judges its holder by that stale record, as the rules say; what must
not happen is that it takes work before its own record says it is alive again: the others then
judge it lost in turn and take the request back, and two agents that do so spend a request's
lost attempts between them in a second (seen with real processes:
``test_mailbox_turning_read_only_for_a_while_loses_no_request`` ended a request
"failed after 3 lost attempts (agents: etl-01, etl-03)", 3 runs of 15 under load).
"""

from __future__ import annotations

import pytest
from test_poll_cost import ListedStore

from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.models import Outcome, State
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.submit import submit
from fdcore.testing.broken import BrokenStorage
from fdcore.testing.memory_fleet import START, MemoryFleet

POLL, STALE, GRACE = 0.5, 2.0, 1.0
SETTINGS = {
    "poll_seconds": POLL,
    "stale_after": STALE,
    "grace_seconds": GRACE,
    "take_over": True,
    "claim": "when_free",
    "concurrency": 2,
}


class ReadOnly(BrokenStorage):
    """The fleet's store, refusing every write (before applying it) while ``read_only``: a
    read-only share, which still serves reads."""

    def __init__(self, inner: MemoryStorage) -> None:
        super().__init__(inner)
        self.read_only = False

    def _refuse(self, key: str) -> None:
        if self.read_only:
            raise StorageUnavailable(key, "Read-only file system (test)")

    def create(self, key: str, data: bytes) -> str:
        self._refuse(key)
        return self.inner.create(key, data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self._refuse(key)
        return self.inner.replace(key, data, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self._refuse(key)
        self.inner.delete(key, etag)


@pytest.mark.parametrize("judged", ["record by record", "by the listing"])
def test_an_agent_whose_record_went_stale_takes_nothing_before_it_is_written_again(
    fdcore_memory_fleet: MemoryFleet, judged: str
) -> None:
    fleet = fdcore_memory_fleet
    store = ReadOnly(fleet.storage)
    if judged == "by the listing":  # the store's versions and time, as on a local folder
        fleet.wrap_storage(lambda inner: ListedStore(store, fleet.clock))  # type: ignore[arg-type]
    else:
        fleet.wrap_storage(lambda inner: store)
    first, second = (fleet.agent(name, **SETTINGS) for name in ("etl-01", "etl-02"))
    submit(fleet.mailbox, ["a"], request_id="r1", now=START)
    first.poll()
    submit(fleet.mailbox, ["b"], request_id="r2", now=START)
    second.poll()
    assert set(first.held) == {"r1"} and set(second.held) == {"r2"}
    assert first.discovery.liveness.by_listing is (judged == "by the listing")
    store.read_only = True
    fleet.finish_runs("r1")  # its end is recorded once writes land again
    for _ in range(7):  # 3.5 s: both records are past stale_after + grace
        fleet.clock.advance(POLL)
        first.poll()
        second.poll()
    store.read_only = False
    # Writes land again; between polls (a table's end, a submission seen) each agent reacts
    # before its next poll has written its record.
    for agent in (first, second):
        agent.react(new_work=True)
    fleet.finish_runs()
    for agent in (first, second):
        agent.react(new_work=True)
    status = fleet.mailbox.status("r2")
    assert status is not None and status.value.attempt == 1, status.value
    assert fleet.mailbox.status("r1").value.state is State.SUCCEEDED  # type: ignore[union-attr]
    # Its next poll writes the record first: then it may judge the other lost and take over.
    for _ in range(20):
        fleet.clock.advance(POLL)
        for agent in (first, second):
            agent.poll()
            fleet.finish_runs()
            agent.react()
    status = fleet.mailbox.status("r2")
    assert status is not None and status.value.state is State.SUCCEEDED, status.value
    assert [a.outcome for a in status.value.attempts][-1] is Outcome.SUCCEEDED
    assert sum(a.outcome is Outcome.LOST for a in status.value.attempts) <= 1
