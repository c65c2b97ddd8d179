"""How a storage backend behind a network retries a transient failure: :class:`RetryPolicy`.

Public, for backend authors (fdcore-onelake and fdcore-s3 use it): the number of tries, their
spacing and the network timeouts, in one value a backend's tests can shorten.
"""

from __future__ import annotations

import random

import attrs

__all__ = [
    "RetryPolicy",
]


@attrs.frozen
class RetryPolicy:
    """How often and how far apart a transient failure is retried.

    The default gives up after 6 tries spread over about 3-6 seconds: long enough to ride out a
    throttling burst or a dropped connection, short enough for an agent's poll to report it.
    """

    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 3.0
    connection_timeout: float = 5.0  # seconds to open a connection
    read_timeout: float = 30.0  # seconds without a byte of answer

    def delay(self, failures: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after ``failures`` failed tries: half fixed, half random ("equal
        jitter"), so racing agents spread out yet each waits at least half the back-off."""
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (failures - 1))
        wait = backoff / 2 + rng.uniform(0, backoff / 2)
        if retry_after is not None:  # the service asked for a pause; honour it within our cap
            wait = max(wait, min(retry_after, self.max_delay))
        return wait
