"""pytest plugin registered by the fdcore distribution (entry point group ``pytest11``).

It declares the markers :class:`fdcore.testing.storage_suite.StorageSuite` uses, so a vendor's
project that runs the suite under ``--strict-markers`` needs no configuration of its own, and
gives every project with fdcore installed these fixtures:

* ``fdcore_fleet``: real ``fdcore agent run`` processes on one environment
  (:class:`fdcore.cli.fleet.AgentFleet`), set up for the table functions of
  :mod:`fdcore.testing.tables`. The environment is ``fdcore_environment`` with the backend
  options ``fdcore_storage_options``: a fresh local folder and none, unless the test's module,
  class or conftest overrides those two fixtures.
* ``fdcore_memory_fleet``: agents in this process on a fresh in-memory store with a manual clock
  (:class:`fdcore.testing.memory_fleet.MemoryFleet`), resolving names with ``fdcore_plugins``:
  the installed plugins, unless overridden (say, to add yours without installing it).
* ``fdcore_quiet_agents``: agents log only errors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdcore.cli.fleet import AgentFleet
from fdcore.plugins.manager import Plugins, load_plugins
from fdcore.testing.memory_fleet import MemoryFleet
from fdcore.testing.tables import log_table_writes

__all__ = [
    "fdcore_environment",
    "fdcore_fleet",
    "fdcore_memory_fleet",
    "fdcore_plugins",
    "fdcore_quiet_agents",
    "fdcore_storage_options",
    "pytest_configure",
]


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


@pytest.fixture
def fdcore_environment(tmp_path: Path) -> str:
    """The URL of the environment ``fdcore_fleet``'s agents share: by default a new local folder,
    ``<tmp_path>/env``. Override it to run the fleet on your backend."""
    return (tmp_path / "env").as_uri()


@pytest.fixture
def fdcore_storage_options() -> dict[str, str]:
    """The backend options ``fdcore_fleet``'s agents (their ``[storage]``), its mailbox and the
    table functions open ``fdcore_environment`` with: by default none. Override it with yours."""
    return {}


@pytest.fixture
def fdcore_fleet(
    tmp_path: Path, fdcore_environment: str, fdcore_storage_options: dict[str, str]
) -> Iterator[AgentFleet]:
    """Real agent processes on ``fdcore_environment``, with config files and logs in
    ``tmp_path``; the writes of :mod:`fdcore.testing.tables` are logged under
    ``<tmp_path>/table-log``. Agents still running at the end are killed."""
    fleet = AgentFleet(tmp_path, fdcore_environment, dict(fdcore_storage_options))
    log_table_writes(fleet, tmp_path / "table-log")
    yield fleet
    fleet.kill_all()


@pytest.fixture
def fdcore_plugins() -> Plugins:
    """The plugins ``fdcore_memory_fleet``'s agents resolve names with: the installed ones.
    Override it to add a plugin that is not installed: ``load_plugins(extra=[(name, module)])``.
    (``fdcore_fleet``'s agents are processes: they load the installed plugins themselves.)"""
    return load_plugins()


@pytest.fixture
def fdcore_memory_fleet(fdcore_plugins: Plugins) -> MemoryFleet:
    """Agents in this process on a new, empty in-memory store; the clock reads ``START``."""
    return MemoryFleet.fresh(plugins=fdcore_plugins)
