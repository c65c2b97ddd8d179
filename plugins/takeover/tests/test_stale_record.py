from __future__ import annotations

from datetime import datetime, timedelta, timezone

from fdcore.contract.models import AgentRecord
from fdcore.plugins.manager import TAKEOVER, load_plugins

NOW = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)


def record(seconds_ago: float, stale_after: float = 60) -> AgentRecord:
    return AgentRecord(
        name="etl-01", updated_at=NOW - timedelta(seconds=seconds_ago), stale_after=stale_after
    )


def test_lost_only_past_stale_after_plus_grace() -> None:
    policy = load_plugins().get(TAKEOVER, "stale_record")
    assert not policy.is_lost(record(60), NOW, grace_seconds=60)
    assert not policy.is_lost(record(120), NOW, grace_seconds=60)  # exactly at the limit
    assert policy.is_lost(record(120.001), NOW, grace_seconds=60)
    assert policy.is_lost(record(3, stale_after=2), NOW, grace_seconds=0.5)


def test_uses_the_lost_agents_own_stale_after() -> None:
    policy = load_plugins().get(TAKEOVER, "stale_record")
    assert not policy.is_lost(record(500, stale_after=600), NOW, grace_seconds=0)


def test_no_record_is_never_lost() -> None:
    policy = load_plugins().get(TAKEOVER, "stale_record")
    assert not policy.is_lost(None, NOW + timedelta(days=365), grace_seconds=0)


def test_a_record_from_a_clock_ahead_is_not_lost() -> None:
    policy = load_plugins().get(TAKEOVER, "stale_record")
    assert not policy.is_lost(record(-30), NOW, grace_seconds=60)


def test_lost_after_is_the_time_after_which_is_lost_holds_and_a_heartbeat_moves_it_on() -> None:
    policy = load_plugins().get(TAKEOVER, "stale_record")
    for seconds_ago in (0, 60, 119.999, 120, 120.001, 500):
        at = record(seconds_ago)
        limit = policy.lost_after(at, 60)  # type: ignore[attr-defined]
        assert policy.is_lost(at, NOW, grace_seconds=60) == (limit < NOW)
    later = policy.lost_after(record(10), 60)  # type: ignore[attr-defined]
    assert later > policy.lost_after(record(20), 60)  # type: ignore[attr-defined]
