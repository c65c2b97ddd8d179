"""The mailbox index reads a file again only when it changed, and is bounded and total."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from unversioned import Unversioned

from fdcore.abc import Listed
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.layout import status_key
from fdcore.contract.models import State, Status
from fdcore.mailbox.access import Mailbox, ProblemLog, folder_problem
from fdcore.mailbox.index import MailboxIndex
from fdcore.mailbox.submit import submit
from fdcore.testing.memory_fleet import START


class Versioned(MemoryStorage):
    """The memory store with a versioned listing, stamped by a clock the test moves; counts
    its operations by kind."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.now = START
        self.stamps: dict[str, datetime] = {}
        self.kinds: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def read(self, key: str):  # type: ignore[no-untyped-def]
        self._count("read")
        return super().read(key)

    def create(self, key: str, data: bytes) -> str:
        etag = super().create(key, data)
        self.stamps[etag] = self.now
        return etag

    def replace(self, key: str, data: bytes, etag: str) -> str:
        new = super().replace(key, data, etag)
        self.stamps[new] = self.now
        return new

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        self._count("list")
        keys = list(super().list(prefix))
        blobs = [(key, super(Versioned, self).read(key)) for key in keys]
        return iter(Listed(k, b.etag, self.stamps[b.etag]) for k, b in blobs if b is not None)


def fresh(versioned: bool = True) -> tuple[Mailbox, MailboxIndex, Versioned | Unversioned]:
    storage: Versioned | Unversioned
    if versioned:
        storage = Versioned.fresh("index-test")
    else:
        storage = Unversioned(MemoryStorage.fresh("index-test"))
    mailbox = Mailbox(storage, ProblemLog("test"))
    return mailbox, MailboxIndex(mailbox), storage


def running(request_id: str, agent: str = "etl-01") -> Status:
    return Status(request=request_id, state=State.RUNNING, agent=agent, updated_at=START)


def test_a_status_is_read_again_only_when_its_listed_etag_moved() -> None:
    mailbox, index, storage = fresh()
    assert isinstance(storage, Versioned)
    submit(mailbox, ["sales"], request_id="r1", now=START)
    etag = mailbox.create(status_key("r1"), running("r1"))
    storage.kinds.clear()
    first = index.statuses.entries()
    assert first["r1"].value == running("r1")
    assert storage.kinds == {"list": 1, "read": 1}
    index.statuses.entries()
    assert storage.kinds == {"list": 2, "read": 1}  # unchanged: not read again
    storage.now = START + timedelta(seconds=5)
    done = running("r1")
    done.state = State.SUCCEEDED
    mailbox.replace(status_key("r1"), done, etag)
    again = index.statuses.entries()
    assert again["r1"].value == done
    assert again["r1"].modified == START + timedelta(seconds=5)
    assert storage.kinds == {"list": 3, "read": 2}


def test_without_etags_settled_files_are_read_once_and_others_every_look() -> None:
    mailbox, index, storage = fresh(versioned=False)
    submit(mailbox, ["sales"], request_id="r1", now=START)
    submit(mailbox, ["sales"], request_id="r2", now=START)
    mailbox.create(status_key("r1"), running("r1"))
    done = running("r2")
    done.state = State.SUCCEEDED
    mailbox.create(status_key("r2"), done)
    index.requests.entries()
    index.statuses.entries()
    before = storage.operations
    index.requests.entries()
    index.statuses.entries()
    # two lists, and the status in flight (the final one and the requests never change)
    assert storage.operations - before == 3


def test_a_malformed_file_is_a_problem_reported_once_and_gone_keys_are_forgotten() -> None:
    mailbox, index, storage = fresh()
    storage.create(status_key("bad"), b"{not json")
    mailbox.create(status_key("r1"), running("r1"))
    found = index.statuses.entries()
    assert found["bad"].found is None and found["bad"].problem
    assert index.statuses.entries()["bad"].problem == found["bad"].problem
    assert len(mailbox.problems.reported) == 1
    storage.delete(status_key("bad"))
    assert set(index.statuses.entries()) == {"r1"}
    assert index.statuses.known("bad") is None


def test_run_records_are_read_once() -> None:
    from fdcore.contract.models import Outcome, RunRecord

    mailbox, index, storage = fresh()
    record = RunRecord(
        request="r1",
        table="sales",
        agent="etl-01",
        attempt=1,
        generation=1,
        started_at=START,
        ended_at=START,
        outcome=Outcome.SUCCEEDED,
    )
    mailbox.create("runs/r1/1-sales.json", record)
    storage.create("runs/r1/1-bad.json", b"[]")
    records, problems = index.runs("r1")
    assert records == [record] and len(problems) == 1
    assert isinstance(storage, Versioned)
    reads = storage.kinds["read"]
    assert index.runs("r1") == (records, problems)
    assert storage.kinds["read"] == reads


def test_with_listing_changes_the_index_takes_in_only_what_changed_in_the_listings_order() -> None:
    storage = MemoryStorage.fresh("index-changes")
    mailbox = Mailbox(storage, ProblemLog("test"))
    index, whole = MailboxIndex(mailbox), MailboxIndex(mailbox)
    whole.statuses._changes = None  # the same index, listing whole folders
    etags = {}
    for request_id in ("r3", "r1"):
        etags[request_id] = mailbox.create(status_key(request_id), running(request_id))
    assert list(index.statuses.list()) == list(whole.statuses.list()) == ["r1", "r3"]
    start = index.statuses.since(0)[1]
    mailbox.create(status_key("r2"), running("r2"))  # amid the listed ids
    storage.delete(status_key("r3"))
    mailbox.replace(status_key("r1"), running("r1", "etl-02"), etags["r1"])
    storage.create("status/r9.json/x", b"{}")  # a folder where a file should be
    calls = storage.operations
    listed = index.statuses.list()
    assert storage.operations == calls + 1  # one list call
    assert listed == whole.statuses.list()  # the same versions, in the same order
    assert list(listed) == ["r1", "r2"]
    assert sorted(index.statuses.since(start)[0] or []) == ["r1", "r2", "r3"]
    assert (
        index.statuses.misplaced
        == whole.statuses.misplaced
        == {"r9": folder_problem("status/r9.json")}
    )
