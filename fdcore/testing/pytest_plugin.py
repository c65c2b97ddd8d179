"""pytest plugin registered by the fdcore distribution (entry point group ``pytest11``).

It declares the markers :class:`fdcore.testing.storage_suite.StorageSuite` uses, so a vendor's
project that runs the suite under ``--strict-markers`` needs no configuration of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes more than a few seconds (real processes, thousands of keys)"
    )


@pytest.fixture
def fdcore_quiet_agents() -> Iterator[None]:
    """Agents log each claim and loss; in simulations of thousands of requests that is noise
    (and time). Use with ``pytestmark = pytest.mark.usefixtures("fdcore_quiet_agents")``."""
    logger = logging.getLogger("fdcore")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)
