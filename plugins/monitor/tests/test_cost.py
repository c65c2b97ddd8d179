"""What a look at the monitor costs in store operations when nothing changed: the listings, and
at most a few reads more, however many finished requests the environment keeps.

Counted operation by operation through a wrapper around the real store (a local folder, and the
memory store), never timed: the times are measured by benchmarks/bench_monitor.py
(docs/monitor.md, "Cost").
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fdcore_monitor.actions import Actions
from fdcore_monitor.app import Settings, create_app
from fdcore_monitor.snapshot import Source
from starlette.testclient import TestClient

from fdcore.contract.layout import agent_key, run_key, status_key
from fdcore.contract.models import AgentRecord, Attempt, Outcome, RunRecord, State, Status
from fdcore.environment import Environment
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import load_plugins
from fdcore.testing.counting import CountingStore

FINISHED = 1000
#: At most this many operations beyond the listings for a look with nothing changed.
BUDGET = 5


def write_finished(mailbox: Mailbox, finished: int, running: int = 0) -> None:
    """Three live agents, ``finished`` succeeded requests of two run records each and
    ``running`` requests still running."""
    now = datetime.now(timezone.utc)
    for n in range(3):
        record = AgentRecord(name=f"etl-{n}", updated_at=now, stale_after=600, concurrency=4)
        mailbox.create(agent_key(record.name), record)
    for n in range(finished + running):
        request_id = f"r{n:05d}"
        created = now - timedelta(seconds=finished + running - n)
        submit(mailbox, ["a", "b"], request_id=request_id, now=created)
        agent = f"etl-{n % 3}"
        done = n < finished
        ended = created + timedelta(seconds=3) if done else None
        outcome = Outcome.SUCCEEDED if done else Outcome.RUNNING
        attempt = Attempt(1, agent, created, ended, outcome)
        state = State.SUCCEEDED if done else State.RUNNING
        mailbox.create(
            status_key(request_id),
            Status(request_id, state, created, agent=agent, attempts=[attempt]),
        )
        for index, table in enumerate(("a", "b") if done else ()):
            start = created + timedelta(seconds=index)
            end = start + timedelta(seconds=1)
            run = RunRecord(request_id, table, agent, 1, 1, start, end, Outcome.SUCCEEDED)
            mailbox.create(run_key(request_id, 1, table), run)


def memory_copy(finished: int, name: str) -> Any:
    """A memory store holding :func:`write_finished`'s environment."""
    memory = load_plugins().open_storage(f"memory://{name}")
    write_finished(Mailbox(memory), finished)
    return memory


@pytest.fixture(scope="module", params=["local folder", "memory"])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An environment of FINISHED finished requests. The local folder's files are copied in
    from a memory store byte for byte (its own writes fsync each file: minutes for this many)."""
    memory = memory_copy(FINISHED, f"cost-{request.param.replace(' ', '-')}")
    if request.param == "memory":
        return str(memory.url)
    root = tmp_path_factory.mktemp("cost") / "env"
    load_plugins().open_storage(root.as_uri()).close()  # an environment, then its files
    for key in memory.list(""):
        blob = memory.read(key)
        assert blob is not None
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(blob.data)
    return root.as_uri()


LOOKS = [
    "/?fragment=1",
    "/",
    "/queue",
    "/queue?fragment=1",
    "/queue?state=failed&page=2",
    "/queue?agent=etl-1&q=r0001",
    "/schedules?fragment=1",
    "/metrics",
    "/api/queue",
]


def test_a_look_with_nothing_changed_costs_the_lists_and_few_reads(store_url: str) -> None:
    store = CountingStore(load_plugins().open_storage(store_url, create=False))
    settings = Settings(Source(Environment(Mailbox(store))), "env", Actions(None, "x"), "127.0.0.1")
    costs = {}
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:
        for look in LOOKS:  # every page once: what never changes is read now
            assert http.get(look).status_code == 200, look
        for look in LOOKS:
            store.calls.clear()
            assert http.get(look).status_code == 200, look
            costs[look] = (store.beyond_lists(), store.lists())
    over = {look: beyond for look, (beyond, _) in costs.items() if sum(beyond.values()) > BUDGET}
    assert not over, over
    # and the listings are those of the folders (agents, requests, status, cancels), not one
    # per request
    assert max(lists for _, lists in costs.values()) <= 4, costs


def test_the_first_look_reads_each_file_once_and_a_change_is_read(tmp_path: Path) -> None:
    inner = load_plugins().open_storage((tmp_path / "env").as_uri())
    mailbox = Mailbox(inner)
    write_finished(mailbox, 20, running=1)
    store = CountingStore(inner)
    source = Source(Environment(Mailbox(store)))

    def rows() -> dict[str, str]:
        return {r.id: r.state for r in source.fleet().requests}

    first = rows()
    assert first["r00020"] == "running" and list(first.values()).count("succeeded") == 20
    reads = store.calls["read_bounded"] + store.calls["read"]
    # each request, each status, each agent record once; and the change signal, read before the
    # first listing (fdcore.mailbox.signal)
    assert reads == 21 + 21 + 3 + 1
    store.calls.clear()
    found = mailbox.status("r00020")
    assert found is not None
    ended = found.value
    ended.state = State.FAILED
    mailbox.replace(status_key("r00020"), ended, found.etag)
    assert rows()["r00020"] == "failed"  # the one status that changed is read again
