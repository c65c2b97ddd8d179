"""The claim policy extension point: when may an agent claim one more request."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs


@attrs.frozen
class AgentLoad:
    """What a claim policy sees of the agent asking."""

    concurrency: int  # workers
    running: int  # requests started on a worker
    waiting: int  # requests claimed but not yet started


@runtime_checkable
class ClaimPolicy(Protocol):
    """Decides, before each claim and each takeover, whether the agent takes one more request."""

    name: str

    def may_claim(self, load: AgentLoad) -> bool:
        """True if the agent may claim (or take over) one more request now."""
