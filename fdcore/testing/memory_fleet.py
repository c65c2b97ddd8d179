"""Agents in this process on one in-memory store, driven by hand (``fdcore_memory_fleet``).

A test makes agents, calls their ``poll()`` itself, moves the clock and ends table runs when it
chooses, so each step of a takeover or a schedule can be checked on its own::

    def test_two_agents_share_work(fdcore_memory_fleet: MemoryFleet) -> None:
        fleet = fdcore_memory_fleet
        first = fleet.agent("etl-01", claim="when_free", concurrency=1)
        second = fleet.agent("etl-02", claim="when_free", concurrency=1)
        submit(fleet.mailbox, ["sales"], request_id="r1", now=START)
        ...
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TypeVar

import attrs

from fdcore.abc import Storage, TableJob, TableResult
from fdcore.agent.components import build_components
from fdcore.agent.core import Agent
from fdcore.agent.schedules import build_schedules
from fdcore.builtin.memory import MemoryStorage
from fdcore.cli.config import parse_config
from fdcore.clock import Clock, ManualClock
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import Plugins, load_plugins
from fdcore.settings.agent_toml import AgentConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "START",
    "ManualRun",
    "MemoryFleet",
    "SkewedClock",
]

#: Where a fleet's clock starts unless told otherwise: on the hour, so hourly slots start there.
START = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)

S = TypeVar("S", bound=Storage)


@attrs.define
class ManualRun:
    """A table run that ends when the test says so."""

    job: TableJob
    result: TableResult | None = None
    cancelled: bool = False

    def poll(self) -> TableResult | None:
        return self.result

    def cancel(self) -> None:
        self.cancelled = True


@attrs.frozen
class SkewedClock:
    """An agent's clock that runs ``skew`` ahead of (or, negative, behind) the fleet's clock."""

    fleet_clock: ManualClock
    skew: timedelta

    def now(self) -> datetime:
        return self.fleet_clock.now() + self.skew


@attrs.define
class MemoryFleet:
    """Agents on one in-memory mailbox, with manual clocks and table runs that end when told.

    ``storage`` is the store itself: what a test reads and writes directly. Agents use
    ``agent_storage``: the same store, unless :meth:`wrap_storage` put a wrapper around it (one
    that fails chosen writes, say). Every agent's clock follows ``clock``, plus its skew.
    """

    storage: MemoryStorage
    clock: ManualClock
    plugins: Plugins = attrs.field(factory=load_plugins)
    agent_storage: Storage = attrs.field(
        default=attrs.Factory(lambda self: self.storage, takes_self=True)
    )
    runs: list[ManualRun] = attrs.field(factory=list)
    agents: dict[str, Agent] = attrs.field(factory=dict)

    @classmethod
    def fresh(cls, start: datetime = START, plugins: Plugins | None = None) -> MemoryFleet:
        """A fleet on a new, empty store whose clock reads ``start``."""
        storage = MemoryStorage.fresh(uuid.uuid4().hex)
        return cls(storage, ManualClock(start), plugins or load_plugins())

    @property
    def mailbox(self) -> Mailbox:
        """The mailbox on the store itself (never through a wrapper): what the test reads."""
        return Mailbox(self.storage)

    def wrap_storage(self, wrapper: Callable[[MemoryStorage], S]) -> S:
        """Agents made from now on use ``wrapper(storage)``; returns the wrapper."""
        wrapped = wrapper(self.storage)
        self.agent_storage = wrapped
        return wrapped

    def start_table(self, job: TableJob) -> ManualRun:
        run = ManualRun(job)
        self.runs.append(run)
        return run

    def agent(self, name: str, *, skew: float = 0.0, **settings: object) -> Agent:
        """A new agent named ``name`` with ``settings`` (AgentConfig fields), its clock ``skew``
        seconds off the fleet's. A second agent of one name replaces the first in ``agents``
        (a restarted process); the first keeps working if the test still polls it."""
        config = AgentConfig(name=name, environment=self.storage.url, **settings)  # type: ignore[arg-type]
        return self._add(config, skew)

    def agent_from_toml(self, text: str, *, skew: float = 0.0) -> Agent:
        """A new agent from an agent.toml's ``text``, read as ``fdcore agent run`` reads one
        (every check; schedules with the plugins' slot functions, routes with their notifiers);
        its ``[agent] environment`` is this fleet's store, whatever ``text`` says."""
        data = tomllib.loads(text)
        data.setdefault("agent", {})["environment"] = self.storage.url
        return self._add(parse_config(data, "agent.toml", self.plugins), skew)

    def _add(self, config: AgentConfig, skew: float) -> Agent:
        name = config.name
        clock: Clock = SkewedClock(self.clock, timedelta(seconds=skew)) if skew else self.clock
        agent = Agent(
            config,
            Mailbox(self.agent_storage),
            build_components(config, self.plugins, self.agent_storage, self.start_table),
            clock,
            schedules=build_schedules(config, self.plugins),
            previous_process_gone=lambda record: True,
        )
        self.agents[name] = agent
        return agent

    def finish_runs(self, *requests: str, succeeded: bool = True) -> None:
        """End the runs still going (of ``requests`` only, if named): succeeded, or failed with
        the message ``boom``."""
        for run in self.runs:
            wanted = not requests or run.job.request in requests
            if wanted and run.result is None and not run.cancelled:
                run.result = TableResult(succeeded, "" if succeeded else "boom")

    def runs_of(self, table: str) -> list[str]:
        """Who ran ``table``, in order, as ``agent#attempt``."""
        return [f"{run.job.agent}#{run.job.attempt}" for run in self.runs if run.job.table == table]
