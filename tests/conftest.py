from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timezone

import attrs
import pytest

from fdcore.abc import TableJob, TableResult
from fdcore.agent.components import Components
from fdcore.agent.core import Agent
from fdcore.agent.schedules import build_schedules
from fdcore.agent.settings import AgentConfig
from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.clock import ManualClock
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import CLAIM, TAKEOVER, load_plugins

START = datetime(2027, 1, 15, 2, 0, tzinfo=timezone.utc)


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


@attrs.define
class Fleet:
    """Agents on one in-memory mailbox, with a shared manual clock and manual table runs."""

    storage: MemoryStorage
    clock: ManualClock
    runs: list[ManualRun] = attrs.field(factory=list)
    agents: dict[str, Agent] = attrs.field(factory=dict)

    @property
    def mailbox(self) -> Mailbox:
        return Mailbox(self.storage)

    def start_table(self, job: TableJob) -> ManualRun:
        run = ManualRun(job)
        self.runs.append(run)
        return run

    def agent(self, name: str, clock: ManualClock | None = None, **settings: object) -> Agent:
        config = AgentConfig(name=name, environment=self.storage.url, **settings)  # type: ignore[arg-type]
        plugins = load_plugins()
        parts = Components(
            plugins.get(CLAIM, config.claim),
            plugins.get(TAKEOVER, config.takeover_policy),
            MailboxLeases(self.storage),
            self.start_table,
        )
        agent = Agent(
            config,
            Mailbox(self.storage),
            parts,
            clock or self.clock,
            schedules=build_schedules(config, plugins),
            previous_process_gone=lambda record: True,
        )
        self.agents[name] = agent
        return agent

    def finish_all(self, succeeded: bool = True) -> None:
        for run in self.runs:
            if run.result is None and not run.cancelled:
                run.result = TableResult(succeeded, "" if succeeded else "boom")

    def poll_all(self, seconds: float = 1.0) -> None:
        for agent in self.agents.values():
            agent.poll()
        self.clock.advance(seconds)


@pytest.fixture
def fleet() -> Fleet:
    return Fleet(MemoryStorage.fresh(uuid.uuid4().hex), ManualClock(START))


FleetFactory = Callable[[], Fleet]
