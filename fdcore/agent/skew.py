"""This agent's clock against the store's: measured at every write of its status record.

Takeover judges other agents by the times they wrote by their own clocks. An agent whose clock
runs ahead by more than ``grace_seconds`` would judge live agents lost, and live holders' table
leases run out; one whose clock runs behind would be judged so by the others. So it measures its
skew (its clock minus the store's, as the store stamped its record's write), and once the skew
passes half the grace (give or take the measurement's error) it warns and writes the times the
others judge it by, its record's ``updated_at`` and its leases' times, in the store's time: its
clock less the skew, less the measurement's error so as never to be behind the store's
(:meth:`ClockSkew.store_time`). While the skew exceeds the grace it also takes nothing over: no
request, and no table lease that another holder has not given up. Before its first measurement
it takes no table lease at all. A store that does not report its time
(:class:`fdcore.abc.StoreClock`) gives no measurement: nothing is corrected or refused.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta

from fdcore.abc import Storage, StoreClock
from fdcore.clock import Clock

log = logging.getLogger("fdcore.agent")

#: What a measurement may be off by: the time between the store stamping the write and this
#: agent reading its clock, and the file system's coarse timestamps.
MEASUREMENT_ERROR = 0.25
#: The skew is kept (and written in the record) to this many decimals of a second.
SKEW_DECIMALS = 3
SKEW_RESOLUTION = 10.0**-SKEW_DECIMALS


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
        # Subtracted from the clock in the times written for others (store_time), once the skew
        # is far: the skew less the error. The store stamps a write before this agent reads its
        # clock, so a measurement is at most the error above the true skew, and the corrected
        # time is never behind the store's (never makes this agent look older), at most the
        # error ahead of it.
        self.offset = 0.0
        self._warned = False

    def measure(self) -> bool:
        """Right after a write: compare the clock now with the store's time of that write.

        True if the times this agent writes for others moved by more than the error.
        """
        if self.storage is None:
            return False
        stamped = self.storage.last_write_time()
        if stamped is None:
            return False
        skew = (self.clock.now() - stamped).total_seconds()
        if not math.isfinite(skew):
            return False
        self.seconds = round(skew, SKEW_DECIMALS)
        far = abs(skew) > self.grace / 2 + self.error
        before = self.offset
        self.offset = round(skew - self.error, 3) if far else 0.0
        if far and not self._warned:
            refusing = "; it takes no request or lease over" if self.refuses_takeover else ""
            log.warning(
                "%s: clock differs from the store's by %+.1f s (grace_seconds %g); it writes "
                "its record and leases in the store's time%s",
                self.agent,
                skew,
                self.grace,
                refusing,
            )
        elif not far and self._warned:
            log.info("%s: clock within %.1f s of the store's again", self.agent, abs(skew))
        self._warned = far
        return abs(self.offset - before) > self.error

    def store_time(self, now: datetime) -> datetime:
        """``now`` (by this agent's clock) in the store's time, as far as it needs correcting:
        what the record's and the leases' times are written in, and judged against."""
        return now - timedelta(seconds=self.offset)

    @property
    def unmeasured(self) -> bool:
        """The store reports its time, and no write of this process has measured it yet: the
        agent cannot tell in which time to write a lease (a restarted agent moves its own
        requests on even in a poll whose record write failed)."""
        return self.storage is not None and self.seconds is None

    @property
    def refuses_takeover(self) -> bool:
        """True while the measured skew exceeds the grace: this agent may misjudge others lost."""
        return self.seconds is not None and abs(self.seconds) > self.grace + self.error
