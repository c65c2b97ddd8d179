"""The mailbox lease provider's two copies: what an acquisition, a renewal, a release and a
request's finish write and free."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import attrs

from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.contract.codec import encode
from fdcore.contract.layout import fence_key, lease_key, status_key
from fdcore.contract.models import Attempt, Outcome, State, Status

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
    # The fence is written to last two terms: with no lease file to say otherwise, it holds the
    # table that long (its holder, alive, would have written both again within half a term).
    assert leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=61)) is None
    later = leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=121))
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


def test_a_renewal_writes_the_fence_only_when_less_than_a_term_of_it_is_left() -> None:
    leases, storage = _leases()
    held = leases.acquire("sales", "a1", "r1", 1, 60, NOW)  # the fence lasts until 120 s
    assert held is not None
    fence = storage.read(fence_key("sales"))

    def renew(seconds: float) -> int:
        nonlocal held
        before = storage.operations
        held = leases.renew(held, 60, NOW + timedelta(seconds=seconds))
        return storage.operations - before

    # Renewals every 30 s write the fence (to last two terms) once less than a term of it is
    # left: at 90 s (then until 210 s).
    assert [renew(30), renew(60), renew(90), renew(120), renew(150)] == [1, 1, 2, 1, 1]
    assert storage.read(fence_key("sales")) != fence
    current = leases.current("sales")
    assert current is not None and current.expires_at == NOW + timedelta(seconds=210)
    # While the lease file is there its expiry rules, not the fence's longer one ...
    assert leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=209)) is None
    # ... and with it deleted by hand, the fence still holds the table past the next renewal,
    storage.delete(lease_key("sales"))
    assert leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=200)) is None
    # which writes both again, fence first (the lease file's replace finds it gone, then
    # creates it: 3 operations).
    assert renew(180) == 3
    assert storage.read(lease_key("sales")) is not None
    assert leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=239)) is None
    later = leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=241))
    assert later is not None and later.lease.generation == 2


def _finish(storage: MemoryStorage, outcome: Outcome, agent: str = "a1") -> None:
    state = State.SUCCEEDED if outcome is Outcome.SUCCEEDED else State.FAILED
    status = Status(
        request="r1",
        state=state,
        agent=agent,
        updated_at=NOW,
        attempt=1,
        attempts=[Attempt(number=1, agent="a1", started_at=NOW, outcome=outcome)],
    )
    storage.create(status_key("r1"), encode(status))


def test_the_holders_own_finish_frees_its_lease_without_a_release() -> None:
    for outcome in (Outcome.SUCCEEDED, Outcome.FAILED):
        leases, storage = _leases()
        assert leases.acquire("sales", "a1", "r1", 1, 60, NOW) is not None
        assert leases.acquire("sales", "a2", "r2", 1, 60, NOW) is None  # r1 not final yet
        _finish(storage, outcome)
        taken = leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=1))
        assert taken is not None and taken.lease.generation == 2, outcome


def test_a_request_failed_by_another_agent_frees_nothing() -> None:
    # Failed past its attempts while a1 was lost: a1 may be paused with its table running.
    leases, storage = _leases()
    assert leases.acquire("sales", "a1", "r1", 1, 60, NOW) is not None
    _finish(storage, Outcome.LOST)
    assert leases.acquire("sales", "a2", "r2", 1, 60, NOW + timedelta(seconds=1)) is None
