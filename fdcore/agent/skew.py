"""This agent's clock against the store's: measured at every write of its status record.

Takeover judges other agents by the times they wrote by their own clocks; an agent whose clock
runs ahead by more than ``grace_seconds`` would judge live agents lost, and live holders' table
leases run out. So it measures its skew (its clock minus the store's, as the store stamped its
record's write), warns once the skew passes half the grace, and takes nothing over while it
exceeds the grace (each give or take the measurement's error): no request, and no table lease
that another holder has not given up. A store that does not report its time
(:class:`fdcore.abc.StoreClock`) gives no measurement, and nothing is refused.
"""

from __future__ import annotations

import logging
import math

from fdcore.abc import Storage, StoreClock
from fdcore.clock import Clock

log = logging.getLogger("fdcore.agent")

#: What a measurement may be off by: the time between the store stamping the write and this
#: agent reading its clock, and the file system's coarse timestamps.
MEASUREMENT_ERROR = 0.25


class ClockSkew:
    """The latest measured difference between this agent's clock and the store's."""

    def __init__(self, agent: str, grace_seconds: float, clock: Clock, storage: Storage) -> None:
        self.agent = agent
        self.grace = grace_seconds
        self.clock = clock
        self.storage = storage if isinstance(storage, StoreClock) else None
        # A store that stamps whole seconds (HTTP Last-Modified) says so: that much more error.
        resolution = getattr(storage, "clock_resolution", 0.0)
        self.error = MEASUREMENT_ERROR + (resolution if isinstance(resolution, float) else 0.0)
        self.seconds: float | None = None  # positive: this agent's clock runs ahead
        self._warned = False

    def measure(self) -> None:
        """Right after a write: compare the clock now with the store's time of that write."""
        if self.storage is None:
            return
        stamped = self.storage.last_write_time()
        if stamped is None:
            return
        skew = (self.clock.now() - stamped).total_seconds()
        if not math.isfinite(skew):
            return
        self.seconds = round(skew, 3)
        far = abs(skew) > self.grace / 2 + self.error
        if far and not self._warned:
            refusing = "; it takes no request or lease over" if self.refuses_takeover else ""
            log.warning(
                "%s: clock differs from the store's by %+.1f s (grace_seconds %g)%s",
                self.agent,
                skew,
                self.grace,
                refusing,
            )
        elif not far and self._warned:
            log.info("%s: clock within %.1f s of the store's again", self.agent, abs(skew))
        self._warned = far

    @property
    def refuses_takeover(self) -> bool:
        """True while the measured skew exceeds the grace: this agent may misjudge others lost."""
        return self.seconds is not None and abs(self.seconds) > self.grace + self.error

    @property
    def refuses_lease_takeover(self) -> bool:
        """True while this agent may not judge another holder's table lease run out by its
        clock: the skew exceeds the grace, or the store reports its time and none was measured
        yet (a restarted agent moves its own requests on in a poll whose record write failed).
        """
        unmeasured = self.storage is not None and self.seconds is None
        return unmeasured or self.refuses_takeover
