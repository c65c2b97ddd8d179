"""The ``one_at_a_time`` claim policy: an example of the simplest extension point."""

from __future__ import annotations

from fdcore.abc import AgentLoad


class OneAtATime:
    """Claim a request only when the agent holds none: one request per agent at a time."""

    name = "one_at_a_time"  # [pipeline] claim = "one_at_a_time"

    def may_claim(self, load: AgentLoad) -> bool:
        return load.running + load.waiting == 0
