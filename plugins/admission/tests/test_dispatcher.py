"""The dispatcher's rules on real lock files, real flock and a real SQLite queue."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fdcore_admission.dispatcher import Dispatcher, set_dispatcher_mode
from fdcore_admission.errors import AdmissionRefused
from fdcore_admission.lanes import Lanes
from fdcore_admission.queue import QUEUED, STARTING

from fdcore.cli.main import main


class Clock:
    now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def dispatcher(tmp_path: Path, clock: Clock) -> Iterator[Dispatcher]:
    set_dispatcher_mode(tmp_path, True)
    running = Dispatcher(tmp_path, clock=clock)
    yield running
    running.close()


ENTRY: dict[str, Any] = {"queued_at": 900.0, "priority": 5, "arguments": ["--day", "1"]}


def held_lane(folder: Path, lane: str) -> int:
    fd = Lanes(folder).try_hold(lane)
    assert fd is not None
    return fd


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def enqueue(dispatcher: Dispatcher, lane: str = "sales", **entry: Any) -> int:
    fd = held_lane(dispatcher.folder, lane)
    dispatcher.enqueue(lane, [fd], {**ENTRY, **entry})
    return fd


def test_enqueue_keeps_the_lane_held_and_writes_a_row_and_a_distinct_entry(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    fd = enqueue(dispatcher, environment={"FDCORE_X": "1", "FDCORE_API_KEY": "k"})
    assert not Lanes(tmp_path).is_free("sales")
    row = dispatcher.queue.get("sales")
    assert row is not None and (row.stage, row.priority, row.queued_at) == (QUEUED, 5, 900.0)
    assert row.environment == {"FDCORE_X": "1"}
    entry = json.loads((tmp_path / "status" / "sales.json").read_text())
    assert entry == {"lane": "sales", "pid": os.getpid(), "heartbeat": 1000.0, "stage": "queued"}
    stored = sqlite3.connect(tmp_path / "queue.sqlite").execute("SELECT lane, stage FROM rows")
    assert stored.fetchall() == [("sales", "queued")]
    assert not os.get_inheritable(fd)


def refused(dispatcher: Dispatcher, code: str, lane: str, fds: list[int], entry: Any) -> None:
    with pytest.raises(AdmissionRefused, match=code):
        dispatcher.enqueue(lane, fds, entry)
    assert not any(is_open(fd) for fd in fds), "a refusal must close every descriptor"
    assert dispatcher.queue.get(lane) is None


def test_enqueue_refuses_outside_dispatcher_mode(dispatcher: Dispatcher, tmp_path: Path) -> None:
    set_dispatcher_mode(tmp_path, False)
    refused(dispatcher, "ADMISSION_NOT_DISPATCHER", "sales", [held_lane(tmp_path, "sales")], ENTRY)


def test_enqueue_takes_exactly_one_descriptor(dispatcher: Dispatcher, tmp_path: Path) -> None:
    refused(dispatcher, "ADMISSION_DESCRIPTORS", "sales", [], ENTRY)
    two = [held_lane(tmp_path, "sales"), os.open(tmp_path / "mode.json", os.O_RDONLY)]
    refused(dispatcher, "ADMISSION_DESCRIPTORS", "sales", two, ENTRY)


def test_enqueue_refuses_a_descriptor_of_another_file(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    other = held_lane(tmp_path, "stock")  # a lane's lock file, but not this lane's
    Lanes(tmp_path).open("sales")
    refused(dispatcher, "ADMISSION_LANE_MISMATCH", "sales", [other], ENTRY)
    # same name, other inode: the lock file was replaced since the sender opened it
    old = held_lane(tmp_path, "sales")
    os.unlink(Lanes(tmp_path).path("sales"))
    Lanes(tmp_path).open("sales")
    refused(dispatcher, "ADMISSION_LANE_MISMATCH", "sales", [old], ENTRY)


@pytest.mark.parametrize(
    "entry",
    [
        {"priority": 1},
        {"queued_at": 1.0},
        {"queued_at": "soon", "priority": 1},
        {"queued_at": 1.0, "priority": True},
        {"queued_at": 1.0, "priority": 1, "environment": {"FDCORE_X": "x" * 4096}},
    ],
)
def test_enqueue_refuses_an_entry_without_queue_start_and_priority(
    dispatcher: Dispatcher, tmp_path: Path, entry: dict[str, Any]
) -> None:
    refused(dispatcher, "ADMISSION_", "sales", [held_lane(tmp_path, "sales")], entry)
    assert Lanes(tmp_path).is_free("sales")


def test_a_claim_needs_starting_and_the_token(dispatcher: Dispatcher, tmp_path: Path) -> None:
    enqueue(dispatcher)
    with pytest.raises(AdmissionRefused, match="ADMISSION_NOT_STARTING"):
        dispatcher.claim("sales", None)
    started = dispatcher.admit_next()
    assert started is not None and started.stage == STARTING and started.token
    with pytest.raises(AdmissionRefused, match="ADMISSION_TOKEN_MISMATCH"):
        dispatcher.claim("sales", "0" * 32)
    kept = dispatcher.queue.get("sales")
    assert kept is not None and kept.token == started.token  # row stays, descriptor stays
    assert "sales" in dispatcher.held and not Lanes(tmp_path).is_free("sales")
    fd = claimed(dispatcher, "sales", started.token)
    assert dispatcher.queue.get("sales") is None and "sales" not in dispatcher.held
    assert not Lanes(tmp_path).is_free("sales")  # the claimant holds it
    os.close(fd)
    assert Lanes(tmp_path).is_free("sales")


def test_each_admission_has_a_fresh_token(dispatcher: Dispatcher, clock: Clock) -> None:
    enqueue(dispatcher)
    first = dispatcher.admit_next()
    clock.now += 61
    dispatcher.expire()
    second = dispatcher.admit_next()
    assert first is not None and second is not None and first.token != second.token
    with pytest.raises(AdmissionRefused, match="TOKEN_MISMATCH"):
        dispatcher.claim("sales", first.token)


def test_admission_order_is_priority_then_queue_start(dispatcher: Dispatcher) -> None:
    enqueue(dispatcher, "a", priority=1, queued_at=1.0)
    enqueue(dispatcher, "b", priority=9, queued_at=5.0)
    enqueue(dispatcher, "c", priority=9, queued_at=3.0)
    order = [dispatcher.admit_next() for _ in range(3)]
    assert [row.lane for row in order if row] == ["c", "b", "a"]
    assert dispatcher.admit_next() is None


@pytest.mark.parametrize(
    ("after", "stage"), [(59.999, STARTING), (60.0, STARTING), (60.001, QUEUED)]
)
def test_an_unclaimed_start_returns_to_queued_only_after_60_seconds(
    dispatcher: Dispatcher, clock: Clock, after: float, stage: str
) -> None:
    enqueue(dispatcher, priority=7, queued_at=123.0)
    started = dispatcher.admit_next()
    assert started is not None
    clock.now += after
    dispatcher.expire()
    row = dispatcher.queue.get("sales")
    assert row is not None and row.stage == stage
    assert (row.queued_at, row.priority) == (123.0, 7)
    if stage == QUEUED:
        assert row.token is None and row.starting_at is None
        with pytest.raises(AdmissionRefused, match="NOT_STARTING"):
            dispatcher.claim("sales", started.token)
    else:
        assert row.token == started.token


def test_restart_keeps_rows_of_free_lanes_and_drops_rows_of_lanes_held_by_others(
    tmp_path: Path, clock: Clock
) -> None:
    set_dispatcher_mode(tmp_path, True)
    first = Dispatcher(tmp_path, clock=clock)
    enqueue(first, "free")
    enqueue(first, "taken")
    first.admit_next()  # "free" (same priority, same start: by name) is starting
    first.close()  # the dispatcher is gone: its descriptors with it
    other = held_lane(tmp_path, "taken")  # someone else takes this lane meanwhile
    second = Dispatcher(tmp_path, clock=clock)
    try:
        assert second.recover() == ["taken"]
        kept = second.queue.get("free")
        assert kept is not None and (kept.stage, kept.token, kept.starting_at) == (
            QUEUED,
            None,
            None,
        )
        assert second.queue.get("taken") is None
        assert not Lanes(tmp_path).is_free("free")  # held again by the new dispatcher
        assert "taken" not in second.held and is_open(other)  # never stolen
    finally:
        second.close()
        os.close(other)


def test_fdcore_admission_status_lists_the_rows_read_only(
    dispatcher: Dispatcher, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["admission", "status", "--host", str(tmp_path / "none"), "--json"]) == 0
    empty = json.loads(capsys.readouterr().out)
    assert (empty["rows"], empty["claims"], empty["measures"]["queue_wait"]["count"]) == ([], [], 0)
    assert not (tmp_path / "none").exists()  # a status creates nothing
    enqueue(dispatcher)
    assert main(["admission", "status", "--host", str(tmp_path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert (row["lane"], row["stage"], row["priority"], row["token"]) == ("sales", QUEUED, 5, None)
    assert main(["admission", "status", "--host", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("sales queued priority 5")


def test_a_claim_records_queue_wait_and_admission_to_claim_apart(
    dispatcher: Dispatcher, tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue(dispatcher, "a", queued_at=900.0)  # queued 100 s before now
    admitted = dispatcher.admit_next()
    assert admitted is not None
    clock.now += 7
    os.close(claimed(dispatcher, "a", admitted.token))
    enqueue(dispatcher, "b", queued_at=1000.0)
    first = dispatcher.admit_next()
    clock.now += 61  # not claimed: back to queued, keeping its queue start
    dispatcher.expire()
    clock.now += 2
    second = dispatcher.admit_next()
    assert first is not None and second is not None
    clock.now += 3
    os.close(claimed(dispatcher, "b", second.token))
    timings = [(c.lane, c.queue_wait, c.admission_to_claim) for c in dispatcher.queue.claims()]
    assert timings == [("a", 100.0, 7.0), ("b", 70.0, 3.0)]
    assert main(["admission", "status", "--host", str(tmp_path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["measures"] == {
        "queue_wait": {"count": 2, "mean": 85.0, "max": 100.0},
        "admission_to_claim": {"count": 2, "mean": 5.0, "max": 7.0},
    }
    assert [(c["lane"], c["queue_wait"]) for c in status["claims"]] == [("a", 100.0), ("b", 70.0)]
    assert main(["admission", "status", "--host", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "queue_wait: 2 claim(s), mean 85.000 s, max 100.000 s" in text
    assert "admission_to_claim: 2 claim(s), mean 5.000 s, max 7.000 s" in text


def claimed(dispatcher: Dispatcher, lane: str, token: str | None) -> int:
    fd = dispatcher.claim(lane, token)
    assert fd is not None
    return fd


def test_claim_asked_again_with_its_token_is_answered_claimed_before(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    enqueue(dispatcher)
    admitted = dispatcher.admit_next()
    assert admitted is not None
    os.close(claimed(dispatcher, "sales", admitted.token))
    assert dispatcher.claim("sales", admitted.token) is None  # as often as asked
    assert dispatcher.claim("sales", admitted.token) is None
    assert len(dispatcher.queue.claims()) == 1
    with pytest.raises(AdmissionRefused, match="ADMISSION_NOT_STARTING"):
        dispatcher.claim("sales", "0" * 32)
    enqueue(dispatcher)  # the lane waits again: the old token is stale now
    with pytest.raises(AdmissionRefused, match="ADMISSION_NOT_STARTING"):
        dispatcher.claim("sales", admitted.token)
    again = dispatcher.admit_next()
    assert again is not None
    with pytest.raises(AdmissionRefused, match="ADMISSION_TOKEN_MISMATCH"):
        dispatcher.claim("sales", admitted.token)
    assert "sales" in dispatcher.held


def test_only_the_last_claims_are_kept(
    dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fdcore_admission.queue.KEPT_CLAIMS", 2)
    for lane in ("a", "b", "c"):
        enqueue(dispatcher, lane)
        admitted = dispatcher.admit_next()
        assert admitted is not None
        os.close(claimed(dispatcher, lane, admitted.token))
    assert [claim.lane for claim in dispatcher.queue.claims()] == ["b", "c"]
