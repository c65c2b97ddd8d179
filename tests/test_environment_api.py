"""``fdcore.Environment`` on a real local folder: each method, and each way a wait ends, with
agents driven by hand on the same folder (their own writers write every status)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage
from test_submit_idempotent import LostAnswer

import fdcore
from fdcore import AsyncEnvironment, Environment
from fdcore.clock import ManualClock
from fdcore.contract.layout import request_key, status_key
from fdcore.environment import QueueFilter, RequestStory, watch
from fdcore.errors import (
    EnvironmentClosed,
    EnvironmentNotFound,
    FdcoreError,
    InvalidId,
    PluginError,
    RequestCancelled,
    RequestDidNotSucceed,
    RequestError,
    RequestExpired,
    RequestFailed,
    RequestNotFound,
    StorageUnavailable,
    WaitTimedOut,
)
from fdcore.incidents.book import Finding, IncidentBook, report
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.archive import archive_files
from fdcore.testing.memory_fleet import START, MemoryFleet

#: A wait that should end soon gives up after this long (a failing test, not a hang).
PATIENCE = 10.0


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    LocalFolderStorage(tmp_path / "env", create=True)
    return tmp_path / "env"


@pytest.fixture
def env(folder: Path) -> Iterator[Environment]:
    with Environment.open(str(folder)) as environment:
        yield environment


@pytest.fixture
def fleet(folder: Path) -> MemoryFleet:
    """Agents driven by hand (``poll()``) on the same local folder, their clock at START."""
    storage = LocalFolderStorage(folder)
    return MemoryFleet(storage, ManualClock(START))  # type: ignore[arg-type]


def later(seconds: float, *steps: Callable[[], object]) -> threading.Thread:
    """Run ``steps`` in a thread after ``seconds``: what agents do while the test waits."""

    def run() -> None:
        time.sleep(seconds)
        for step in steps:
            step()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def requests_in(folder: Path) -> list[str]:
    return sorted(path.name for path in (folder / "requests").iterdir())


# -- open, submit, request ---------------------------------------------------------------------


def test_the_public_names_are_exported() -> None:
    assert fdcore.Environment is Environment
    assert fdcore.RequestFailed is RequestFailed
    for name in ("Environment", "RequestHandle", "WaitTimedOut", "RequestNotFound"):
        assert name in fdcore.__all__


def test_open_refuses_a_missing_environment_unless_told_to_create(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentNotFound):
        Environment.open(str(tmp_path / "none"))
    with Environment.open(str(tmp_path / "new"), create=True) as env:
        assert env.queue().rows == []
    assert env.closed.is_set()


def test_an_unknown_scheme_names_the_python_parameter_not_the_commands_flag() -> None:
    with pytest.raises(PluginError) as caught:
        Environment.open("fil:///srv/fd/prod")
    assert "(Environment.open(url); installed:" in str(caught.value)
    assert "--env" not in str(caught.value)

    async def scenario() -> None:
        await AsyncEnvironment.open("fil:///srv/fd/prod")

    with pytest.raises(PluginError, match=r"\(Environment\.open\(url\); installed:"):
        asyncio.run(scenario())


def test_submit_queues_a_request_and_request_tells_its_story(env: Environment) -> None:
    deadline = datetime(2030, 1, 1, tzinfo=timezone.utc)
    handle = env.submit(["sales", "stock"], id="r1", deadline=deadline, max_attempts=2)
    story = handle.story()
    assert (handle.id, story.state, story.request.entities) == ("r1", "waiting", ["sales", "stock"])
    assert story.request.created_by == "python" and story.request.deadline == deadline
    assert env.request("r1") == story


def test_submit_is_idempotent_under_an_id(env: Environment, folder: Path) -> None:
    first = env.submit(["sales"], id="nightly")
    assert env.submit(["sales"], id="nightly") == first
    assert requests_in(folder) == ["nightly.json"]
    with pytest.raises(RequestError) as caught:
        env.submit(["stock"], id="nightly")
    assert "\n" not in str(caught.value) and "entities=sales" in str(caught.value)


def test_a_submit_retried_after_a_lost_answer_queues_one_request(folder: Path) -> None:
    storage = LostAnswer(folder)
    env = Environment(Mailbox(storage))
    storage.lose_next = True
    with pytest.raises(StorageUnavailable):
        env.submit(["sales"], id="orchestrated-1")
    assert env.submit(["sales"], id="orchestrated-1").id == "orchestrated-1"
    assert requests_in(folder) == ["orchestrated-1.json"]


def test_submit_takes_a_deadline_as_a_duration_from_now_and_refuses_a_past_one(
    env: Environment, folder: Path
) -> None:
    before = datetime.now(timezone.utc)
    handle = env.submit(["sales"], id="r1", deadline=timedelta(minutes=10))
    assert handle.request is not None and handle.request.deadline is not None
    assert handle.request.deadline >= before + timedelta(minutes=10)
    for past in (timedelta(minutes=-1), before - timedelta(seconds=1)):
        with pytest.raises(RequestError, match=r"^deadline .* is past: give a later time"):
            env.submit(["sales"], id="r2", deadline=past)
    assert requests_in(folder) == ["r1.json"]


def test_submit_takes_one_table_by_its_name_alone(env: Environment) -> None:
    handle = env.submit("sales", id="r1")
    assert handle.story().request.entities == ["sales"]
    assert env.submit(["sales"], id="r1") == handle  # the same work: idempotent

    async def scenario() -> list[str]:
        handle = await AsyncEnvironment(env).submit("stock", id="r2")
        return (await handle.story()).request.entities

    assert asyncio.run(scenario()) == ["stock"]


@pytest.mark.parametrize(
    ("tables", "options", "error"),
    [
        ([], {}, InvalidId),
        ("sales,stock", {}, InvalidId),
        (["bad name"], {}, InvalidId),
        (["sales"], {"id": "../x"}, InvalidId),
        (["sales"], {"deadline": datetime(2030, 1, 1)}, RequestError),
        (["sales"], {"max_attempts": 0}, FdcoreError),
    ],
)
def test_submit_refuses_bad_input_in_one_line(
    env: Environment, folder: Path, tables: object, options: dict[str, object], error: type
) -> None:
    with pytest.raises(error) as caught:
        env.submit(tables, **options)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    assert not (folder / "requests").exists() or requests_in(folder) == []


def test_an_unknown_request_is_request_not_found(env: Environment) -> None:
    with pytest.raises(RequestNotFound) as caught:
        env.request("nope")
    assert isinstance(caught.value, LookupError) and caught.value.request_id == "nope"
    with pytest.raises(RequestNotFound):
        env.wait("nope", timeout=1)


# -- cancel, retry, queue ----------------------------------------------------------------------


def test_cancel_with_no_agent_ends_it_and_retry_runs_it_again(env: Environment) -> None:
    env.submit(["a", "b"], id="r1")
    done = env.handle("r1").cancel(by="ann", reason="wrong day")
    assert (done.created, done.state) == (True, "cancelled")
    retry = env.retry("r1", id_of_retry="r1-again", by="ann", from_table="b")
    assert retry.id == "r1-again" and retry.story().request.entities == ["b"]
    assert retry.story().request.retry_of == "r1"
    # Retried again under the same id (an answer lost): the same retry, nothing new.
    assert env.retry("r1", id_of_retry="r1-again") == retry
    with pytest.raises(RequestError, match="already retried as r1-again"):
        env.retry("r1")
    assert env.request("r1").retried_as == "r1-again"


def test_queue_pages_and_filters_through_one_kept_look(env: Environment) -> None:
    for number in range(5):
        env.submit(["sales"], id=f"r{number}")
    env.cancel("r3", by="ann")
    page = env.queue(limit=2)
    assert [row.id for row in page.rows] == ["r4", "r3"] and page.has_next
    assert page.counts == {"waiting": 4, "cancelled": 1}
    assert [row.id for row in env.queue(offset=2, limit=2).rows] == ["r2", "r1"]
    cancelled = env.queue(QueueFilter(state="cancelled"))
    assert [row.id for row in cancelled.rows] == ["r3"] and not cancelled.has_next
    assert env.queue(QueueFilter(text="R1")).matching == 1
    # One reader kept: a request file is read once, however many looks.
    reads: list[str] = []
    storage = env.mailbox.storage
    original = storage.read_bounded  # type: ignore[attr-defined]

    def counted(key: str, max_bytes: int) -> object:
        reads.append(key)
        return original(key, max_bytes)

    storage.read_bounded = counted  # type: ignore[attr-defined]
    env.queue()
    assert not [key for key in reads if key.startswith("requests/")]
    with pytest.raises(ValueError):
        env.queue(limit=0)


def test_agents_schedules_and_incidents(env: Environment, fleet: MemoryFleet) -> None:
    fleet.agent("etl-01").poll()
    rows = env.agents()
    assert [(row.name, row.state) for row in rows] == [("etl-01", rows[0].state)]
    assert env.schedules() == []
    assert env.incidents() == []
    IncidentBook(env.mailbox).change(
        lambda document: report(
            document, Finding("agent_offline", "etl-02", "etl-02 is offline"), START, "test"
        )
    )
    [incident] = env.incidents(include_resolved=False)
    acknowledged = env.acknowledge(incident.id, by="ann")
    assert acknowledged.acknowledged_by == "ann"


def test_agents_show_the_requests_an_agent_holds_now_not_at_its_last_heartbeat(
    env: Environment, fleet: MemoryFleet
) -> None:
    agent = fleet.agent("etl-01", concurrency=3, claim="always")
    agent.poll()  # its record: nothing held, not rewritten for stale_after / 4
    for number, table in enumerate(["sales", "stock", "prices", "costs"], 1):
        env.submit([table], id=f"r{number}")
    agent.poll()  # claims all four, starts three
    assert [(row.id, row.state) for row in env.queue(QueueFilter(agent="etl-01")).rows] == [
        ("r4", "accepted"),
        ("r3", "running"),
        ("r2", "running"),
        ("r1", "running"),
    ]
    [row] = env.agents()
    assert row.record is not None and row.record.running == 0  # the record's old figure
    assert (row.running, row.concurrency, row.requests) == (3, 3, ["r1", "r2", "r3", "r4"])
    assert env.agents(queue=env.queue().rows) == [row]  # from a look just made: the same
    fleet.finish_runs("r1", "r2", "r3")
    agent.poll()
    [row] = env.agents()
    assert (row.running, row.requests) == (1, ["r4"])


# -- wait --------------------------------------------------------------------------------------


def test_wait_returns_the_final_story_as_the_agent_finishes(
    env: Environment, fleet: MemoryFleet
) -> None:
    agent = fleet.agent("etl-01")
    handle = env.submit(["sales", "stock"], id="r1")
    seen: list[str] = []

    def finish_every_table() -> None:
        for _ in range(2):
            agent.poll()
            fleet.finish_runs("r1")
        agent.poll()

    later(0.2, finish_every_table)
    story = env.wait(handle.id, timeout=PATIENCE, progress=lambda s: seen.append(s.state))
    assert story.state == "succeeded" and story.tables_done == ["sales", "stock"]
    assert seen[0] == "waiting" and seen[-1] == "succeeded"
    assert handle.wait(timeout=0) == story  # ended: at once


def test_wait_raises_request_failed_with_the_failed_table(
    env: Environment, fleet: MemoryFleet
) -> None:
    agent = fleet.agent("etl-01")
    env.submit(["sales"], id="r1", max_attempts=1)
    later(0.2, agent.poll, lambda: fleet.finish_runs("r1", succeeded=False), agent.poll)
    with pytest.raises(RequestFailed) as caught:
        env.wait("r1", timeout=PATIENCE)
    error = caught.value
    assert isinstance(error, RequestDidNotSucceed) and error.state == "failed"
    assert isinstance(error.story, RequestStory) and error.story.runs[-1].table == "sales"
    assert str(error).startswith("request r1 failed") and "\n" not in str(error)


def test_wait_raises_request_expired(env: Environment, fleet: MemoryFleet) -> None:
    agent = fleet.agent("etl-01")
    env.submit(["sales"], id="r1", deadline=START - timedelta(minutes=1))
    later(0.2, agent.poll)
    with pytest.raises(RequestExpired) as caught:
        env.wait("r1", timeout=PATIENCE)
    assert caught.value.story.state == "expired"


def test_wait_raises_request_cancelled_for_a_cancel_with_no_agent(env: Environment) -> None:
    env.submit(["sales"], id="r1")
    later(0.2, lambda: env.cancel("r1", by="ann"))
    with pytest.raises(RequestCancelled) as caught:
        env.wait("r1", timeout=PATIENCE)
    assert caught.value.story.cancel.by == "ann"


def test_wait_times_out_while_it_is_still_waiting(env: Environment) -> None:
    env.submit(["sales"], id="r1")
    with pytest.raises(WaitTimedOut) as caught:
        env.wait("r1", timeout=0.3)
    error = caught.value
    assert isinstance(error, TimeoutError) and (error.state, error.timeout) == ("waiting", 0.3)
    assert str(error) == "request r1 still waiting after waiting 0.3s; it goes on"


@pytest.mark.parametrize("timeout", [-1.0, float("nan")])
def test_wait_refuses_a_negative_or_nan_timeout(env: Environment, timeout: float) -> None:
    env.submit(["sales"], id="r1")
    with pytest.raises(ValueError, match=r"^timeout must be a number of seconds, 0 or more"):
        env.wait("r1", timeout=timeout)

    async def scenario() -> None:
        async with AsyncEnvironment(env) as aenv:
            await aenv.handle("r1").wait(timeout=timeout)

    with pytest.raises(ValueError, match=r"^timeout must be"):
        asyncio.run(scenario())


@pytest.mark.parametrize("face", ["sync", "asyncio"])
def test_progress_is_told_the_final_story_once(
    env: Environment, fleet: MemoryFleet, folder: Path, face: str
) -> None:
    """The status lands before the run record of the table that ended it: the final story is
    told once, with that record, not first without it and again with it."""
    agent = fleet.agent("etl-01")
    env.submit(["sales"], id="r1")
    agent.poll()
    fleet.finish_runs("r1")
    agent.poll()
    [record] = (folder / "runs" / "r1").iterdir()
    kept = record.read_bytes()
    record.unlink()  # as if the agent had written the status and not yet the record
    later(0.3, lambda: record.write_bytes(kept))
    told: list[RequestStory] = []
    if face == "sync":
        story = env.wait("r1", timeout=PATIENCE, progress=told.append)
    else:

        async def scenario() -> RequestStory:
            return await AsyncEnvironment(env).wait("r1", timeout=PATIENCE, progress=told.append)

        story = asyncio.run(scenario())
    assert told == [story] and [run.table for run in story.runs] == ["sales"]


def test_wait_finds_a_request_archived_while_it_waited(
    env: Environment, fleet: MemoryFleet
) -> None:
    agent = fleet.agent("etl-01")
    env.submit(["sales"], id="r1")
    mailbox = fleet.mailbox

    def run_and_archive() -> None:
        agent.poll()
        fleet.finish_runs("r1")
        agent.poll()
        archive_files(mailbox, "r1", "2027/01/15", True, START)

    # The watch sees the status land; the request may already be archived when it is read.
    thread = later(0.2, run_and_archive)
    story = env.wait("r1", timeout=PATIENCE)
    assert story.state == "succeeded"
    thread.join()
    assert env.wait("r1", timeout=0).archived == "2027/01/15"


def test_a_polling_wait_follows_a_request_into_the_archive() -> None:
    """A store with no watch: the status lands and is archived between two looks."""
    fleet = MemoryFleet.fresh()
    agent = fleet.agent("etl-01")
    env = Environment(fleet.mailbox, poll=0.3)
    env.submit(["sales"], id="r1")

    def run_and_archive() -> None:
        agent.poll()
        fleet.finish_runs("r1")
        agent.poll()
        archive_files(fleet.mailbox, "r1", "2027/01/15", True, START)

    later(0.05, run_and_archive)
    story = env.wait("r1", timeout=PATIENCE)
    assert (story.state, story.archived) == ("succeeded", "2027/01/15")


@pytest.mark.parametrize("hostile", ["garbage", "fifo", "folder"])
def test_a_hostile_status_is_a_problem_and_the_wait_goes_on(folder: Path, hostile: str) -> None:
    env = Environment(Mailbox(LocalFolderStorage(folder)), poll=0.05)
    env.submit(["sales"], id="r1")
    path = folder / status_key("r1")
    path.parent.mkdir(exist_ok=True)
    if hostile == "garbage":
        path.write_bytes(b"\x00{not json")
    elif hostile == "fifo":
        import os

        os.mkfifo(path)
    else:
        (path / "inner").mkdir(parents=True)
    with pytest.raises(WaitTimedOut):
        env.wait("r1", timeout=0.3)
    # The bad file goes, an agent's cancel lands: the same kind of wait ends.
    if path.is_dir():
        (path / "inner").rmdir()
        path.rmdir()
    else:
        path.unlink()
    later(0.1, lambda: env.cancel("r1", by="ann"))
    with pytest.raises(RequestCancelled):
        env.wait("r1", timeout=PATIENCE)


class Flaky(LocalFolderStorage):
    """A folder whose reads fail while ``down`` is set, as a store briefly unreachable."""

    down = False

    def read_bounded(self, key: str, max_bytes: int):  # type: ignore[no-untyped-def]
        if self.down:
            raise StorageUnavailable(key, "503 Service Unavailable")
        return super().read_bounded(key, max_bytes)


def test_a_store_briefly_unavailable_does_not_end_the_wait(folder: Path) -> None:
    storage = Flaky(folder)
    env = Environment(Mailbox(storage), poll=0.05)
    env.submit(["sales"], id="r1")
    storage.down = True
    with pytest.raises(WaitTimedOut):
        env.wait("r1", timeout=0.3)

    def cancel_and_come_back() -> None:
        Environment(Mailbox(LocalFolderStorage(folder))).cancel("r1", by="ann")
        storage.down = False

    later(0.2, cancel_and_come_back)
    with pytest.raises(RequestCancelled):
        env.wait("r1", timeout=PATIENCE)


def waited_until_closed(
    env: Environment, face: str, request_id: str, ready: threading.Event | None = None
) -> BaseException | None:
    """Wait for ``request_id`` (no timeout) in a thread, through ``face``; close ``env`` once
    ``ready`` is set (default: once the wait has looked); what the wait raised (None if it
    did not end within PATIENCE)."""
    looked = ready or threading.Event()
    raised: list[BaseException] = []

    def wait_sync() -> None:
        try:
            env.wait(request_id, progress=lambda story: looked.set())
        except BaseException as exc:
            raised.append(exc)

    async def wait_async() -> None:
        try:
            await AsyncEnvironment(env).wait(request_id, progress=lambda story: looked.set())
        except BaseException as exc:
            raised.append(exc)

    target = wait_sync if face == "sync" else lambda: asyncio.run(wait_async())
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    assert looked.wait(PATIENCE), "the wait never looked"
    env.close()
    thread.join(PATIENCE)
    return raised[0] if raised else None


@pytest.mark.parametrize("store", ["watched", "polled once a minute"])
@pytest.mark.parametrize("face", ["sync", "asyncio"])
def test_closing_the_environment_ends_a_wait_in_another_thread(
    folder: Path, store: str, face: str
) -> None:
    """A wait with no timeout waited on forever once its environment was closed (a service
    closing its environment at shutdown kept the waiting thread): it ends with
    EnvironmentClosed, whether the store's watch or a minute's poll was to wake it."""
    mailbox = (
        Mailbox(LocalFolderStorage(folder)) if store == "watched" else MemoryFleet.fresh().mailbox
    )
    env = Environment(mailbox, poll=60)
    env.submit(["sales"], id="r1")
    raised = waited_until_closed(env, face, "r1")
    assert isinstance(raised, EnvironmentClosed), raised
    assert (raised.request_id, raised.state) == ("r1", "waiting")
    assert raised.story is not None and raised.story.id == "r1"
    assert "the environment was closed" in str(raised) and "\n" not in str(raised)
    with pytest.raises(EnvironmentClosed):  # a wait on a closed environment: at once
        env.wait("r1")


class ClosedUnderALook(LocalFolderStorage):
    """A folder whose status reads, once ``hold`` is set, wait until the test closes the store,
    then fail as a closed client does (with no fdcore error)."""

    hold = False

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.in_read = threading.Event()
        self.store_closed = threading.Event()

    def read_bounded(self, key: str, max_bytes: int):  # type: ignore[no-untyped-def]
        if self.hold and key.startswith("status/"):
            self.in_read.set()
            self.store_closed.wait(PATIENCE)
            raise RuntimeError("cannot schedule new futures after shutdown")
        return super().read_bounded(key, max_bytes)

    def close(self) -> None:
        self.store_closed.set()
        super().close()


def test_a_store_closed_under_a_look_ends_the_wait_as_closed(folder: Path) -> None:
    storage = ClosedUnderALook(folder)
    env = Environment(Mailbox(storage), poll=0.05)
    env.submit(["sales"], id="r1")
    storage.hold = True
    raised = waited_until_closed(env, "sync", "r1", ready=storage.in_read)
    assert isinstance(raised, EnvironmentClosed), raised


def test_a_long_wait_reads_the_story_once_while_nothing_changes(
    folder: Path, fleet: MemoryFleet
) -> None:
    reads: list[str] = []

    class Counted(LocalFolderStorage):
        def read_bounded(self, key: str, max_bytes: int):  # type: ignore[no-untyped-def]
            reads.append(key)
            return super().read_bounded(key, max_bytes)

    agent = fleet.agent("etl-01")
    env = Environment(Mailbox(Counted(folder)), poll=0.01)
    env.submit(["sales"], id="r1")
    agent.poll()  # running: a status that does not change while the test waits
    reads.clear()
    with pytest.raises(WaitTimedOut) as caught:
        env.wait("r1", timeout=0.3)
    assert caught.value.state == "running"
    # Its request read for its etag and for the story, once each, over some 30 looks.
    assert reads.count(request_key("r1")) == 2


# -- changes -----------------------------------------------------------------------------------


def test_changes_yields_state_changes_as_they_land(env: Environment, fleet: MemoryFleet) -> None:
    env.submit(["sales"], id="before")  # there before: no change of it is yielded
    stop = threading.Event()
    changes = env.changes(stop=stop)
    agent = fleet.agent("etl-01")

    def submit_and_run() -> None:
        env.submit(["stock"], id="r1")
        time.sleep(0.1)
        env.cancel("before", by="ann")

    later(0.1, submit_and_run)
    seen = []
    for change in changes:
        seen.append((change.request_id, change.previous, change.state))
        if len(seen) == 2:
            break
    assert seen == [("r1", None, "waiting"), ("before", "waiting", "cancelled")]
    later(0.1, agent.poll)
    claimed = next(changes)
    assert (claimed.request_id, claimed.previous) == ("r1", "waiting")
    assert claimed.state in ("accepted", "running")
    later(0.1, stop.set)
    assert list(changes) == []  # stopped: the iteration ends


@pytest.mark.parametrize("face", ["sync", "asyncio-threading-event", "asyncio-event"])
def test_changes_end_soon_after_stop_with_a_poll_of_a_minute(face: str) -> None:
    """A store with no watch, looked at once a minute: only the stop can end it in PATIENCE."""
    env = Environment(MemoryFleet.fresh().mailbox, poll=60)
    ended = threading.Event()
    started = threading.Event()
    stop: threading.Event | asyncio.Event

    def follow_sync() -> None:
        assert isinstance(stop, threading.Event)
        changes = env.changes(stop=stop)
        started.set()
        assert list(changes) == []
        ended.set()

    async def follow_async() -> None:
        nonlocal stop
        if face == "asyncio-event":
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            stop_here = stop
            setter = lambda: loop.call_soon_threadsafe(stop_here.set)  # noqa: E731
        else:
            stop = threading.Event()
            setter = stop.set
        later(0.3, setter)
        async for _ in AsyncEnvironment(env).changes(stop=stop):
            pass
        ended.set()

    if face == "sync":
        stop = threading.Event()
        threading.Thread(target=follow_sync, daemon=True).start()
        assert started.wait(PATIENCE)
        later(0.3, stop.set)
    else:
        threading.Thread(target=lambda: asyncio.run(follow_async()), daemon=True).start()
    assert ended.wait(PATIENCE)


def test_changes_sees_a_change_written_by_another_process(env: Environment, folder: Path) -> None:
    env.submit(["sales"], id="r1")
    changes = env.changes()
    other = f"""
from fdcore_localfs.store import LocalFolderStorage
from fdcore.environment import Environment
from fdcore.mailbox.access import Mailbox
Environment(Mailbox(LocalFolderStorage({str(folder)!r}))).cancel("r1", by="other")
"""
    subprocess.run([sys.executable, "-c", other], check=True, timeout=PATIENCE)
    change = next(changes)
    assert (change.request_id, change.previous, change.state) == ("r1", "waiting", "cancelled")


# -- asyncio -----------------------------------------------------------------------------------


def test_the_asyncio_face_waits_without_blocking_the_loop(folder: Path, fleet: MemoryFleet) -> None:
    agent = fleet.agent("etl-01")

    async def scenario() -> tuple[RequestStory, int, list[str]]:
        async with await AsyncEnvironment.open(str(folder), poll=0.05) as env:
            handle = await env.submit(["sales"], id="r1")
            assert await env.submit(["sales"], id="r1") == handle  # idempotent
            assert (await handle.story()).state == "waiting"
            ticks = 0
            states: list[str] = []

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            def finish() -> None:
                agent.poll()
                fleet.finish_runs("r1")
                agent.poll()

            ticker = asyncio.create_task(tick())
            later(0.3, finish)
            story = await handle.wait(timeout=PATIENCE, progress=lambda s: states.append(s.state))
            ticker.cancel()
            assert (await env.queue()).counts == {"succeeded": 1}
            assert [run.table for run in await env.table_runs("r1")] == ["sales"]
            return story, ticks, states

    story, ticks, states = asyncio.run(scenario())
    assert story.state == "succeeded" and states[-1] == "succeeded"
    assert ticks >= 10  # the loop ran on while the wait waited (0.3 s at 10 ms a tick)


def test_the_asyncio_face_ends_each_way_and_follows_changes(folder: Path) -> None:
    async def scenario() -> None:
        async with await AsyncEnvironment.open(str(folder), poll=0.05) as env:
            await env.submit(["sales"], id="r1")
            with pytest.raises(WaitTimedOut):
                await env.wait("r1", timeout=0.1)
            with pytest.raises(RequestNotFound):
                await env.request("nope")
            stop = asyncio.Event()
            seen: list[tuple[str, str]] = []

            async def follow() -> None:
                async for change in env.changes(stop=stop):
                    seen.append((change.request_id, change.state))
                    stop.set()

            follower = asyncio.create_task(follow())
            await asyncio.sleep(0.2)  # its first look made
            cancelled = asyncio.create_task(env.handle("r1").wait(timeout=PATIENCE))
            await env.cancel("r1", by="ann")
            with pytest.raises(RequestCancelled):
                await cancelled
            await asyncio.wait_for(follower, PATIENCE)
            assert seen == [("r1", "cancelled")]
            retry = await env.retry("r1", id_of_retry="r2")
            assert (await retry.story()).request.retry_of == "r1"
            assert await env.agents() == [] and await env.schedules() == []
            assert await env.incidents() == []

    asyncio.run(scenario())


def test_on_a_local_folder_a_wait_and_changes_wake_by_the_watch_not_the_poll(
    folder: Path,
) -> None:
    """With a poll of a minute, only the folder's watch can end these within PATIENCE."""
    env = Environment.open(str(folder), poll=60)
    writer = Environment.open(str(folder))
    env.submit(["sales"], id="r1")
    env.submit(["sales"], id="r2")
    ended: list[BaseException] = []
    changes = env.changes()

    def wait() -> None:
        try:
            env.wait("r1")
        except RequestCancelled as exc:
            ended.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    later(1.0, lambda: writer.cancel("r1", by="ann"), lambda: writer.cancel("r2", by="ann"))
    waiter.join(PATIENCE)
    assert len(ended) == 1 and not waiter.is_alive()
    seen = {next(changes).request_id, next(changes).request_id}
    assert seen == {"r1", "r2"}
    env.close()


class SlowToArm(LocalFolderStorage):
    """A folder whose watch is armed only after 1.5 s: a loaded machine's watch thread."""

    def watch(self, prefix: str, changed: Callable[[], None], stop: threading.Event) -> None:
        time.sleep(1.5)
        super().watch(prefix, changed, stop)


def a_cancel_ends_a_wait_on_a_slow_watch(folder: Path, at: float) -> bool:
    """A wait on ``folder`` (its poll a minute) through a watch armed only after 1.5 s; the
    request is cancelled ``at`` seconds in: whether that ended the wait."""
    env = Environment(Mailbox(SlowToArm(folder)), poll=60)
    env.submit(["sales"], id="r1")
    writer = Environment(Mailbox(LocalFolderStorage(folder)))
    later(at, lambda: writer.cancel("r1", by="ann"))
    ended: list[BaseException] = []

    def wait() -> None:
        try:
            env.wait("r1")  # no timeout: only a look can end it, and the poll is a minute
        except RequestCancelled as exc:
            ended.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(PATIENCE)
    woken = bool(ended) and not waiter.is_alive()
    env.close()
    return woken


def test_a_status_landing_before_the_watch_is_armed_ends_the_wait_at_once() -> None:
    """While a new watch may not be armed (up to watch.SETTLING seconds) a wait looks every
    few tens of milliseconds: the cancel landing at 0.7 s ends it, not its minute-long poll
    (with half a second of settling it waited the whole poll)."""
    folder = Path(tempfile.mkdtemp()) / "env"
    LocalFolderStorage(folder, create=True)
    assert a_cancel_ends_a_wait_on_a_slow_watch(folder, 0.7) and watch.SETTLING > 1.5


def test_a_status_landing_before_the_watch_is_armed_ends_the_wait_when_it_is(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel lands after the settling looks stopped and before the watch is armed (a
    machine loaded longer than watch.SETTLING); the store's first call, as it is armed, wakes
    the wait, not its minute-long poll."""
    monkeypatch.setattr(watch, "SETTLING", 0.2)
    assert a_cancel_ends_a_wait_on_a_slow_watch(folder, 0.5)
