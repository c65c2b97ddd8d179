"""The takeover policy extension point: when is an agent lost, so its requests may move."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from fdcore.models import AgentRecord


@runtime_checkable
class TakeoverPolicy(Protocol):
    """Judges from an agent's status record whether it is lost."""

    name: str

    def is_lost(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> bool:
        """True if the agent that wrote ``record`` is lost at ``now``.

        ``record`` is None when the agent has no readable record: such an agent is never lost
        under the default policy, since its absence proves nothing.
        """
