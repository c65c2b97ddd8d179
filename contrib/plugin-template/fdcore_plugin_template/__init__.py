"""An example fdcore plugin: the ``one_at_a_time`` claim policy.

Replace the class with your implementation and the hook with the one for its extension point
(see docs/plugins.md for every hook and protocol).
"""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import AgentLoad, ClaimPolicy


class OneAtATime:
    """Claim a request only when the agent holds none: one request per agent at a time."""

    name = "one_at_a_time"

    def may_claim(self, load: AgentLoad) -> bool:
        return load.running + load.waiting == 0


@hookimpl
def fdcore_claim_policies() -> Sequence[ClaimPolicy]:
    return [OneAtATime()]
