"""fdcore-claim: the ``always`` and ``when_free`` claim policies."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import AgentLoad, ClaimPolicy


class Always:
    """Claim every unclaimed request seen, busy or not: fdcore's historical behaviour."""

    name = "always"

    def may_claim(self, load: AgentLoad) -> bool:
        return True


class WhenFree:
    """Claim only while a worker is free, leaving the rest for an agent with room.

    Requests claimed but not started count against the workers too, so an agent never holds
    more than ``concurrency`` requests at once. With a host (``[agent] host``) they count
    against the host's free slots as well, which the host's other agents share: an agent whose
    own workers are idle does not claim while the machine is full.
    """

    name = "when_free"

    def may_claim(self, load: AgentLoad) -> bool:
        if load.host_free is not None and load.waiting >= load.host_free:
            return False
        return load.running + load.waiting < load.concurrency


@hookimpl
def fdcore_claim_policies() -> Sequence[ClaimPolicy]:
    return [Always(), WhenFree()]
