"""The host folder's rules, each from both sides of its boundary, on a real folder with flock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fdcore_hostslots import host as host_module
from fdcore_hostslots.errors import (
    CapacityBusy,
    CapacityInvalid,
    DrainRequired,
    LayoutOutdated,
    LayoutUnknown,
    LeaseInvalid,
    RollbackUnsafe,
    ShrinkRefused,
    SlotIdInvalid,
    SlotLost,
    WorkspaceBusy,
)
from fdcore_hostslots.host import Host
from fdcore_hostslots.liveness import Holder

from fdcore.abc import HostSlots


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def dead(holder: Holder) -> bool:
    return False


def make_host(path: Path, clock: Clock, slots: int = 1) -> Host:
    host = Host(path, clock=clock, alive=dead)
    assert host.init()
    if slots != 1:
        host.set_slots(slots)
    return host


def take(host: Host, request: str, table: str = "t", scope: str = "job", ttl: float = 30.0):  # type: ignore[no-untyped-def]
    return host.acquire(holder="a1", request=request, table=table, scope=scope, lease_seconds=ttl)


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_init_writes_the_layout_with_one_slot_and_only_once(tmp_path: Path, clock: Clock) -> None:
    host = make_host(tmp_path / "h", clock)
    assert json.loads((tmp_path / "h/layout.json").read_text()) == {"version": 3}
    assert json.loads((tmp_path / "h/capacity.json").read_text()) == {"slot_count": 1}
    host.set_slots(3)
    assert not host.init()  # a second init never resets the capacity
    assert host.slots().configured == 3


@pytest.mark.parametrize("count", [1, 8])
def test_slot_counts_1_and_8_are_accepted(tmp_path: Path, clock: Clock, count: int) -> None:
    host = make_host(tmp_path, clock)
    host.set_slots(count)
    leases = [take(host, f"r{i}") for i in range(count)]
    assert sorted(lease.slot for lease in leases) == list(range(count))
    with pytest.raises(CapacityBusy):
        take(host, "one-more")


@pytest.mark.parametrize("count", [0, 9, -1, True, 2.0, "3"])
def test_set_slots_refuses_counts_outside_1_to_8(
    tmp_path: Path, clock: Clock, count: object
) -> None:
    host = make_host(tmp_path, clock)
    with pytest.raises(CapacityInvalid, match="HOST_SLOT_CAPACITY_INVALID"):
        host.set_slots(count)
    assert host.slots().configured == 1


@pytest.mark.parametrize(
    "content",
    [None, "not json", {"slot_count": 0}, {"slot_count": 9}, {"slot_count": "2"}, {}, [2]],
)
def test_missing_or_invalid_capacity_fails_closed(
    tmp_path: Path, clock: Clock, content: object
) -> None:
    host = make_host(tmp_path, clock)
    capacity = tmp_path / "capacity.json"
    if content is None:
        capacity.unlink()
    else:
        capacity.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(CapacityInvalid, match="HOST_SLOT_CAPACITY_INVALID"):
        take(host, "r1")
    with pytest.raises(CapacityInvalid):
        host.slots()
    host.set_slots(2)  # the operator's fix
    assert take(host, "r1").slot == 0


@pytest.mark.parametrize("name", ["00", "08", "8", "-1", "x", "01"])
def test_a_slot_folder_that_is_not_a_canonical_id_fails_closed(
    tmp_path: Path, clock: Clock, name: str
) -> None:
    host = make_host(tmp_path, clock, slots=8)
    (tmp_path / "slots" / name).mkdir()
    with pytest.raises(SlotIdInvalid, match="HOST_SLOT_ID_INVALID"):
        take(host, "r1")


def test_canonical_ids_0_and_7_are_slot_folders(tmp_path: Path, clock: Clock) -> None:
    host = make_host(tmp_path, clock, slots=8)
    (tmp_path / "slots" / "0").mkdir(exist_ok=True)
    (tmp_path / "slots" / "7").mkdir()
    assert host.slots().busy == 0


def test_a_live_lease_above_the_slot_count_fails_closed(tmp_path: Path, clock: Clock) -> None:
    host = make_host(tmp_path, clock, slots=3)
    take(host, "r0")
    take(host, "r1")
    take(host, "r2")
    # written behind set-slots' back: capacity says 2 while slot 2 is live
    write(tmp_path / "capacity.json", {"slot_count": 2})
    with pytest.raises(SlotIdInvalid, match="slots/2 holds a live lease"):
        host.slots()


def test_shrink_is_refused_while_a_live_lease_is_at_or_above_the_new_count(
    tmp_path: Path, clock: Clock
) -> None:
    host = make_host(tmp_path, clock, slots=3)
    take(host, "r0")
    high = take(host, "r1")
    assert high.slot == 1
    with pytest.raises(ShrinkRefused, match=r"HOST_SLOT_SHRINK_REFUSED.*slot 1"):
        host.set_slots(1)
    assert host.slots().configured == 3
    lease = host.leases()
    assert [(lease.slot, lease.request) for lease in lease] == [(0, "r0"), (1, "r1")]  # not moved
    assert host.set_slots(2) == 2  # the live leases are below 2: allowed


def test_all_idle_shrink_is_allowed_and_leftover_folders_are_not_occupancy(
    tmp_path: Path, clock: Clock
) -> None:
    host = make_host(tmp_path, clock, slots=3)
    for lease in [take(host, request) for request in ("r0", "r1", "r2")]:
        host.release(lease.request, lease.token)
    assert sorted(p.name for p in (tmp_path / "slots").iterdir()) == ["0", "1", "2"]
    host.set_slots(1)
    assert host.slots().busy == 0
    take(host, "r3")
    with pytest.raises(CapacityBusy, match="CAPACITY_BUSY"):
        take(host, "r4")


def test_task_scope_conflicts_on_the_same_table_job_scope_never(
    tmp_path: Path, clock: Clock
) -> None:
    host = make_host(tmp_path, clock, slots=4)
    take(host, "r1", table="sales", scope="task")
    with pytest.raises(WorkspaceBusy, match=r"WORKSPACE_BUSY.*sales"):
        take(host, "r2", table="sales", scope="task")
    take(host, "r3", table="stock", scope="task")  # another table
    take(host, "r4", table="sales", scope="job")  # a job never conflicts
    take(host, "r5", table="sales", scope="job")
    assert host.slots().busy == 4


def test_one_busy_slot_does_not_make_the_host_busy(tmp_path: Path, clock: Clock) -> None:
    host = make_host(tmp_path, clock, slots=3)
    take(host, "r1")
    assert host.slots() == HostSlots(3, 1)
    assert host.slots().free == 2
    take(host, "r2")
    take(host, "r3")
    assert not host.slots().free


def test_a_lease_is_found_by_request_and_token(tmp_path: Path, clock: Clock) -> None:
    host = make_host(tmp_path, clock, slots=2)
    first = take(host, "r1")
    take(host, "r2")
    with pytest.raises(SlotLost):
        host.renew("r1", "not-the-token")
    with pytest.raises(SlotLost):
        host.renew("r2", first.token)
    clock.now += 5
    assert host.renew("r1", first.token).renewed_at == clock.now
    host.release("r1", "not-the-token")  # not ours: left alone
    assert host.slots().busy == 2
    host.release("r1", first.token)
    assert host.slots().busy == 1


def test_a_dead_holders_lease_is_recovered_after_its_lease_time(
    tmp_path: Path, clock: Clock
) -> None:
    host = make_host(tmp_path, clock)
    old = take(host, "r1", ttl=30)
    clock.now += 30  # exactly at the lease time: still live
    with pytest.raises(CapacityBusy):
        take(host, "r2")
    clock.now += 0.001
    assert take(host, "r2").slot == 0
    with pytest.raises(SlotLost):
        host.renew("r1", old.token)


def test_a_living_holders_lease_is_never_recovered(tmp_path: Path, clock: Clock) -> None:
    host = Host(tmp_path, clock=clock)  # the real liveness check: this process is alive
    host.init()
    take(host, "r1", ttl=1)
    clock.now += 3600
    with pytest.raises(CapacityBusy):
        take(host, "r2")


def layout1(path: Path, effective: int = 2) -> None:
    path.mkdir(parents=True, exist_ok=True)
    write(path / "layout.json", {"version": 1})
    write(path / "capacity.json", {"desired": 4, "effective": effective})


def test_an_older_layout_is_refused_until_migrated(tmp_path: Path, clock: Clock) -> None:
    layout1(tmp_path)
    host = Host(tmp_path, clock=clock, alive=dead)
    with pytest.raises(LayoutOutdated, match="HOST_LAYOUT_OUTDATED"):
        take(host, "r1")
    with pytest.raises(LayoutOutdated):
        host.slots()
    assert "2 slot(s)" in host.migrate()
    assert host.slots().configured == 2
    assert json.loads((tmp_path / "capacity.json").read_text()) == {"slot_count": 2}
    assert host.migrate() == "already at layout 3"


def test_migrate_refuses_while_a_lease_is_live(tmp_path: Path, clock: Clock) -> None:
    layout1(tmp_path)
    write(
        tmp_path / "slots/0/lease.json",
        {
            "holder": "a1",
            "request": "r1",
            "table": "t",
            "token": "x",
            "acquired_at": "2026-01-01T00:00:00+00:00",
            "renewed_at": "2026-01-01T00:00:00+00:00",
            "lease_seconds": 30,
            "process": {"pid": 1, "boot_id": None, "start": None},
        },
    )
    write(tmp_path / "slots/0/scope.json", {"scope": "job", "request": "r1"})
    host = Host(tmp_path, clock=lambda: 1767225600.0 + 10, alive=dead)  # 10 s into the lease
    with pytest.raises(DrainRequired, match="HOST_UPGRADE_DRAIN_REQUIRED"):
        host.migrate()
    assert json.loads((tmp_path / "layout.json").read_text()) == {"version": 1}
    assert not (tmp_path / "migrate.residue").exists()
    drained = Host(tmp_path, clock=lambda: 1767225600.0 + 31, alive=dead)
    assert "migrated" in drained.migrate()


def test_migrate_resumes_from_its_residue_after_a_crash(tmp_path: Path, clock: Clock) -> None:
    layout1(tmp_path, effective=3)
    # the crash: residue written, capacity.json rewritten, layout.json not yet published
    write(
        tmp_path / "migrate.residue",
        {"from": 1, "to": 2, "capacity": {"desired": 4, "effective": 3}},
    )
    write(tmp_path / "capacity.json", {"slot_count": 3})
    host = Host(tmp_path, clock=clock, alive=dead)
    with pytest.raises(LayoutOutdated, match="unfinished"):
        take(host, "r1")
    host.migrate()
    assert not (tmp_path / "migrate.residue").exists()
    assert host.slots().configured == 3


def test_a_mismatched_layout_without_residue_is_refused(tmp_path: Path, clock: Clock) -> None:
    layout1(tmp_path)
    write(tmp_path / "capacity.json", {"slot_count": 3})  # layout 2's, under a layout 1 label
    host = Host(tmp_path, clock=clock, alive=dead)
    with pytest.raises(LayoutUnknown, match=r"no migrate\.residue"):
        host.migrate()
    write(tmp_path / "layout.json", {"version": 2})
    write(tmp_path / "capacity.json", {"desired": 4, "effective": 2})  # layout 1's, labelled 2
    with pytest.raises(LayoutUnknown, match=r"no migrate\.residue"):
        host.migrate()
    write(tmp_path / "layout.json", {"version": "3"})
    with pytest.raises(LayoutUnknown, match="HOST_LAYOUT_UNKNOWN"):
        host.slots()


@pytest.mark.parametrize(
    "lease", ["not json", {"holder": "a1"}, {"process": "a string", "request": "r"}]
)
def test_an_unreadable_lease_fails_closed(tmp_path: Path, clock: Clock, lease: object) -> None:
    host = make_host(tmp_path, clock, slots=2)
    write(tmp_path / "slots/0/scope.json", {"scope": "job", "request": "r"})
    target = tmp_path / "slots/0/lease.json"
    target.write_text(lease if isinstance(lease, str) else json.dumps(lease))
    with pytest.raises(LeaseInvalid, match="HOST_SLOT_LEASE_INVALID"):
        take(host, "r1")


# -- generations and rollback ----------------------------------------------------------------


def generation_file(path: Path, slot: int) -> int:
    value: int = json.loads((path / f"slots/{slot}/generation.json").read_text())["generation"]
    return value


def test_a_slots_generation_rises_with_every_lease_and_fences_stale_holders(
    tmp_path: Path, clock: Clock
) -> None:
    host = make_host(tmp_path, clock, slots=2)
    first = take(host, "r1", ttl=30)
    other = take(host, "r2", ttl=3600)  # slot 1 counts its own generations
    assert (first.slot, first.generation, other.slot, other.generation) == (0, 1, 1, 1)
    host.release(first.request, first.token)
    second = take(host, "r3")
    assert (second.slot, second.generation) == (0, 2)
    clock.now += 31  # r3's holder is dead: its lease is recovered by r4
    third = take(host, "r4")
    assert (third.slot, third.generation) == (0, 3)
    for stale in (first, second):
        with pytest.raises(SlotLost, match="HOST_SLOT_LOST"):
            host.renew(stale.request, stale.token)
        host.release(stale.request, stale.token)  # refused, silently: the slot stays r4's
    assert [(lease.slot, lease.request) for lease in host.leases()] == [(0, "r4"), (1, "r2")]
    assert host.renew("r4", third.token).generation == 3


@pytest.mark.parametrize("lost", ["lease.json", "generation.json"])
def test_a_lost_file_never_lets_a_generation_repeat_or_go_back(
    tmp_path: Path, clock: Clock, lost: str
) -> None:
    host = make_host(tmp_path, clock)
    stale = take(host, "r1")
    assert stale.generation == 1
    (tmp_path / "slots/0" / lost).unlink()
    if lost == "lease.json":  # the slot looks free: taken again, above the lost generation
        newer = take(host, "r2")
        assert newer.generation == 2 and generation_file(tmp_path, 0) == 2
        with pytest.raises(SlotLost):
            host.renew("r1", stale.token)
    else:  # the lease file still says 1: the holder renews (which writes the file again)
        host.renew("r1", stale.token)
        assert generation_file(tmp_path, 0) == 1
        host.release("r1", stale.token)
        assert take(host, "r2").generation == 2


def test_a_generation_issued_by_an_acquisition_cut_short_fences_the_older_lease(
    tmp_path: Path, clock: Clock
) -> None:
    host = make_host(tmp_path, clock)
    old = take(host, "r1")
    # an acquisition that wrote generation 2 and crashed before its lease file
    write(tmp_path / "slots/0/generation.json", {"generation": 2})
    with pytest.raises(SlotLost, match="issued generation 2 after this lease's 1"):
        host.renew("r1", old.token)
    clock.now += 31
    assert take(host, "r2").generation == 3


@pytest.mark.parametrize("token", ["0", "0:x", "9:1", "00:1", "-1:1", "0:1:1", ""])
def test_a_token_that_names_no_lease_is_lost(tmp_path: Path, clock: Clock, token: str) -> None:
    host = make_host(tmp_path, clock)
    take(host, "r1")
    with pytest.raises(SlotLost):
        host.renew("r1", token)


@pytest.mark.parametrize("value", [0, -1, "2", 1.5, None])
def test_an_unreadable_generation_fails_closed(tmp_path: Path, clock: Clock, value: object) -> None:
    host = make_host(tmp_path, clock)
    write(tmp_path / "slots/0/generation.json", {"generation": value})
    with pytest.raises(LeaseInvalid, match=r"generation\.json: generation"):
        take(host, "r1")


def test_an_older_release_refuses_a_folder_a_newer_one_migrated(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout1(tmp_path)
    Host(tmp_path, clock=clock, alive=dead).migrate()  # this release: layout 3
    # the older reader: a release that knows layouts up to 2 only
    monkeypatch.setattr(host_module, "LAYOUT_VERSION", 2)
    older = Host(tmp_path, clock=clock, alive=dead)
    for action in (older.slots, lambda: take(older, "r1"), older.migrate, older.init):
        with pytest.raises(
            RollbackUnsafe, match=r"HOST_UPGRADE_ROLLBACK_UNSAFE.*layout 3 is newer"
        ):
            action()
    with pytest.raises(RollbackUnsafe):
        older.set_slots(2)
    assert json.loads((tmp_path / "capacity.json").read_text()) == {"slot_count": 2}


def test_a_layout_newer_than_this_release_is_a_rollback(tmp_path: Path, clock: Clock) -> None:
    host = make_host(tmp_path, clock)
    lease = take(host, "r1")
    write(tmp_path / "layout.json", {"version": 4})
    with pytest.raises(RollbackUnsafe, match="upgrade fdcore-hostslots"):
        host.slots()
    with pytest.raises(RollbackUnsafe):
        host.renew("r1", lease.token)
    with pytest.raises(RollbackUnsafe):
        host.migrate()


def test_migrate_from_layout_2_drops_its_dead_leases_and_starts_generations(
    tmp_path: Path, clock: Clock
) -> None:
    write(tmp_path / "layout.json", {"version": 2})
    write(tmp_path / "capacity.json", {"slot_count": 2})
    write(tmp_path / "slots/1/scope.json", {"scope": "job", "request": "r0"})
    layout2_lease = {
        "holder": "a1",
        "request": "r0",
        "table": "t",
        "token": "5f0c",  # layout 2's random token
        "acquired_at": "2026-01-01T00:00:00+00:00",
        "renewed_at": "2026-01-01T00:00:00+00:00",
        "lease_seconds": 30,
        "process": {"pid": 1, "boot_id": None, "start": None},
    }
    write(tmp_path / "slots/1/lease.json", layout2_lease)
    live = Host(tmp_path, clock=lambda: 1767225600.0 + 10, alive=dead)
    with pytest.raises(LayoutOutdated, match="layout 2 is older than 3"):
        live.slots()
    with pytest.raises(DrainRequired):
        live.migrate()
    drained = Host(tmp_path, clock=lambda: 1767225600.0 + 31, alive=dead)  # the lease is dead
    assert drained.migrate() == "migrated to layout 3 with 2 slot(s)"
    host = Host(tmp_path, clock=clock, alive=dead)
    assert not (tmp_path / "slots/1/lease.json").exists()
    assert [take(host, r).generation for r in ("r1", "r2")] == [1, 1]


def test_a_handle_opened_before_migrate_acts_on_the_migrated_folder(
    tmp_path: Path, clock: Clock
) -> None:
    layout1(tmp_path, effective=2)
    before = Host(tmp_path, clock=clock, alive=dead)
    with pytest.raises(LayoutOutdated):
        before.slots()
    # another process migrates, as an operator does, while this handle stays open
    run = subprocess.run(
        [sys.executable, "-m", "fdcore", "host", "migrate", "--host", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "migrated to layout 3 with 2 slot(s)" in run.stdout
    assert before.slots() == HostSlots(2, 0)
    lease = take(before, "r1")
    assert (lease.slot, lease.generation) == (0, 1)
    assert before.renew("r1", lease.token).generation == 1
    before.set_slots(3)
    before.release("r1", lease.token)
    assert before.slots() == HostSlots(3, 0)
