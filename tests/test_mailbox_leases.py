"""The mailbox lease provider's two copies: what a release writes and what it frees."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import attrs

from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.codec import encode
from fdcore.contract.layout import fence_key, lease_key

NOW = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)


def _leases() -> tuple[MailboxLeases, MemoryStorage]:
    storage = MemoryStorage.fresh(uuid.uuid4().hex)
    return MailboxLeases(storage), storage


def test_a_release_is_one_write_and_frees_the_table_at_once() -> None:
    leases, storage = _leases()
    held = leases.acquire("sales", "a1", "r1", 1, 60, NOW)
    assert held is not None
    writes = storage.operations
    leases.release(held, NOW)
    assert storage.operations - writes == 1  # the lease file alone, not the fence
    current = leases.current("sales")
    assert current is not None and current.released and current.generation == 1
    taken = leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=1))
    assert taken is not None and taken.lease.generation == 2


def test_a_live_fence_still_blocks_when_the_lease_file_is_deleted() -> None:
    leases, storage = _leases()
    held = leases.acquire("sales", "a1", "r1", 1, 60, NOW)
    assert held is not None
    storage.delete(lease_key("sales"))
    assert leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=30)) is None
    later = leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=61))
    assert later is not None and later.lease.generation == 2  # never back to 1


def test_an_acquisition_cut_short_after_its_fence_blocks_on_the_fence() -> None:
    leases, storage = _leases()
    first = leases.acquire("sales", "a1", "r1", 1, 60, NOW)
    assert first is not None
    leases.release(first, NOW)
    # a2's fence write landed, its lease write did not: the lease file says generation 1, released.
    fence = storage.read(fence_key("sales"))
    assert fence is not None
    live = attrs.evolve(first.lease, holder="a2", request="r2", generation=2)
    storage.replace(fence_key("sales"), encode(live), fence.etag)
    assert leases.acquire("sales", "a3", "r3", 1, 60, NOW + timedelta(seconds=1)) is None
    current = leases.current("sales")
    assert current is not None and (current.holder, current.generation) == ("a2", 2)
