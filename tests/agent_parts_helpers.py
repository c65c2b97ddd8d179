"""What the agent's parts are tested on (tests/agent/): one in-memory environment, a manual clock.

Each part is built here from the smallest set of its neighbours, exactly as :class:`Agent`
wires them, so a test drives the part itself rather than a whole poll.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from fdcore.abc import Blob, TableJob
from fdcore.agent.cancels import Cancels
from fdcore.agent.components import Components
from fdcore.agent.discovery import Discovery
from fdcore.agent.presence import Presence, ProcessGone
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.tables import Tables
from fdcore.agent.work import Holdings, Work
from fdcore.builtin.leases import MailboxLeases
from fdcore.builtin.memory import MemoryStorage
from fdcore.clock import ManualClock
from fdcore.contract.layout import status_key
from fdcore.contract.models import Attempt, State, Status
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit
from fdcore.plugins.manager import CLAIM, TAKEOVER, load_plugins
from fdcore.settings.agent_toml import AgentConfig
from fdcore.testing.memory_fleet import START, ManualRun

INSTANCE = "process-1"  # the process under test; statuses naming it are its own writes


class Outage(MemoryStorage):
    """The in-memory store, whose replaces fail (before applying) while ``down``, and whose
    creates of keys under ``failing_creates`` and reads of keys under ``failing_reads`` fail
    too."""

    down = False
    failing_creates: str | None = None
    failing_reads: str | None = None

    def read(self, key: str) -> Blob | None:
        if self.failing_reads is not None and key.startswith(self.failing_reads):
            raise StorageUnavailable(key, "read failed (test outage)")
        return super().read(key)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        if self.down:
            raise StorageUnavailable(key, "replace failed (test outage)")
        return super().replace(key, data, etag)

    def create(self, key: str, data: bytes) -> str:
        if self.failing_creates is not None and key.startswith(self.failing_creates):
            raise StorageUnavailable(key, "create failed (test outage)")
        return super().create(key, data)


class Environment:
    """One mailbox in memory, a manual clock, and table runs that end when the test says so."""

    def __init__(self) -> None:
        self.storage = Outage.fresh(uuid.uuid4().hex)
        self.mailbox = Mailbox(self.storage)
        self.clock = ManualClock(START)
        self.leases = MailboxLeases(self.storage)
        self.runs: list[ManualRun] = []

    def config(self, name: str = "etl-01", **settings: object) -> AgentConfig:
        return AgentConfig(name=name, environment=self.storage.url, **settings)  # type: ignore[arg-type]

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def submit(self, request_id: str, *tables: str, **fields: object) -> None:
        fields.setdefault("now", START)
        submit(self.mailbox, list(tables), request_id=request_id, **fields)  # type: ignore[arg-type]

    def status(self, request_id: str) -> Status:
        found = self.mailbox.status(request_id)
        assert found is not None, f"{request_id} has no status"
        return found.value

    def write_status(self, status: Status) -> None:
        """Write a status behind the parts' backs: another agent's, or one whose answer was lost."""
        key = status_key(status.request)
        blob = self.storage.read(key)
        if blob is None:
            self.mailbox.create(key, status)
        else:
            self.mailbox.replace(key, status, blob.etag)

    # -- the parts ---------------------------------------------------------------------------------

    def start_table(self, job: TableJob) -> ManualRun:
        run = ManualRun(job)
        self.runs.append(run)
        return run

    def components(self, config: AgentConfig) -> Components:
        plugins = load_plugins()
        return Components(
            plugins.get(CLAIM, config.claim),
            plugins.get(TAKEOVER, config.takeover_policy),
            self.leases,
            self.start_table,
        )

    def holdings(self, config: AgentConfig) -> Holdings:
        return Holdings(config, self.leases, self.clock)

    def status_changes(
        self,
        config: AgentConfig,
        holdings: Holdings,
        record_time: Callable[[], datetime | None] = lambda: None,
    ) -> StatusChanges:
        """``record_time``: the agent record that stood as a status write landed, as Agent
        gives it (None, the default: none known, so every ownership check reads)."""
        return StatusChanges(config, self.mailbox, INSTANCE, holdings, record_time)

    def presence(
        self, config: AgentConfig, gone: ProcessGone = lambda record: False
    ) -> tuple[Presence, Holdings]:
        holdings = self.holdings(config)
        presence = Presence(
            config, self.mailbox, INSTANCE, holdings, [], gone, skew=self.skew(config)
        )
        return presence, holdings

    def tables(
        self,
        config: AgentConfig,
        record_time: Callable[[], datetime | None] = lambda: None,
    ) -> tuple[Tables, StatusChanges, Holdings]:
        holdings = self.holdings(config)
        changes = self.status_changes(config, holdings, record_time)
        tables = Tables(
            config,
            self.mailbox,
            self.components(config),
            self.clock,
            changes,
            holdings,
            skew=self.skew(config),
        )
        return tables, changes, holdings

    def discovery(self, config: AgentConfig) -> tuple[Discovery, Holdings]:
        tables, changes, holdings = self.tables(config)
        discovery = Discovery(
            config,
            self.mailbox,
            self.components(config),
            INSTANCE,
            changes,
            holdings,
            skew=self.skew(config),
            cancels=Cancels(self.mailbox, holdings, changes, tables),
        )
        return discovery, holdings

    def skew(self, config: AgentConfig) -> ClockSkew:
        """The agent's clock against the store's: measured nothing on a store without a clock."""
        return ClockSkew(config.name, config.grace_seconds, self.clock, self.mailbox.storage)

    def claimed(self, changes: StatusChanges, holdings: Holdings, request_id: str) -> Work:
        """Claim a submitted request through ``changes``; the work it now holds."""
        request = self.mailbox.request(request_id)
        assert request is not None, f"{request_id} was not submitted"
        changes.claim(request.value, self.clock.now())
        return holdings.work[request_id]


def attempt(number: int, agent: str, at: datetime = START, instance: str = "other") -> Attempt:
    """An attempt as another process (``instance``) wrote it, still running."""
    return Attempt(number=number, agent=agent, started_at=at, instance=instance)


def held_by(
    request_id: str, agent: str | None, *attempts: Attempt, state: State = State.ACCEPTED
) -> Status:
    """A status as another agent (or none, handed back) left it, one second after START."""
    return Status(
        request=request_id,
        state=state,
        agent=agent,
        updated_at=START + timedelta(seconds=1),
        attempt=attempts[-1].number if attempts else 1,
        attempts=list(attempts),
    )
