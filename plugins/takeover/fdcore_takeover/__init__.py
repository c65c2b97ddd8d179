"""fdcore-takeover: the ``stale_record`` takeover policy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from fdcore import hookimpl
from fdcore.abc import TakeoverPolicy
from fdcore.contract.models import AgentRecord


class StaleRecord:
    """Lost once the agent's record is older than its own ``stale_after`` plus the grace.

    An agent with no record, or an unreadable one, is never lost: a missing file proves nothing
    about a machine we cannot reach. The grace covers clock differences between machines.
    """

    name = "stale_record"

    def is_lost(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> bool:
        if record is None:
            return False
        return now > self.lost_after(record, grace_seconds)

    def lost_after(self, record: AgentRecord, grace_seconds: float) -> datetime:
        """The time after which ``is_lost`` holds on ``record`` (the optional part of
        :class:`fdcore.abc.TakeoverPolicy`: an agent then judges a fleet by comparing times)."""
        return record.updated_at + timedelta(seconds=record.stale_after + grace_seconds)


@hookimpl
def fdcore_takeover_policies() -> Sequence[TakeoverPolicy]:
    return [StaleRecord()]
