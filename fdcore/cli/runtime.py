"""The runtime shell around :class:`fdcore.agent.Agent`: real time, real signals, sleeping.

Everything that is not deterministic lives here, so the agent itself can run under the
simulator. ``fdcore agent run`` calls :func:`run_agent`.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from types import FrameType

from fdcore.agent.components import StartTable, build_components
from fdcore.agent.core import Agent
from fdcore.agent.schedules import build_schedules
from fdcore.agent.settings import AgentConfig
from fdcore.clock import Clock, SystemClock
from fdcore.contract.models import AgentRecord
from fdcore.incidents.watch import watch_incidents
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.plugins.manager import Plugins, load_plugins

log = logging.getLogger("fdcore.runtime")


def same_host_process_gone(record: AgentRecord) -> bool:
    """True if the record's process ran on this machine and has exited (a restart after a crash)."""
    if record.host != socket.gethostname() or record.pid is None:
        return False
    if record.pid == os.getpid():
        return False
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, someone else's
    return False


class AgentRuntime:
    """Runs one agent until it is told to stop (SIGTERM, SIGINT, or :meth:`request_stop`)."""

    def __init__(
        self,
        config: AgentConfig,
        plugins: Plugins | None = None,
        *,
        clock: Clock | None = None,
        start_table: StartTable | None = None,
    ) -> None:
        self.config = config
        plugins = plugins or load_plugins()
        self.storage = plugins.open_storage(
            config.environment, dict(config.storage_options), config.storage_backend
        )
        self.agent = Agent(
            config,
            Mailbox(self.storage, ProblemLog(config.name)),
            build_components(config, plugins, self.storage, start_table),
            clock or SystemClock(),
            previous_process_gone=same_host_process_gone,
            schedules=build_schedules(config, plugins),
        )
        self._wake = threading.Event()
        self._stop_requested_at: float | None = None
        # [incidents] enabled: evaluation and delivery on a thread of their own (docs/incidents.md)
        self.incidents = watch_incidents(
            config, plugins, clock or SystemClock(), self.agent.parts.notify
        )

    def request_stop(self, *_: object) -> None:
        if self._stop_requested_at is None:
            self._stop_requested_at = time.monotonic()
            log.info("%s: stopping: no new claims, running tables finish", self.config.name)
        self._wake.set()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def run(self) -> int:
        """Poll until stopped and idle (or the shutdown grace runs out); return the exit code."""
        agent = self.agent
        log.info("%s: running on %s", self.config.name, self.storage.url)
        if self.incidents is not None:
            self.incidents.start()
        while True:
            if self._stop_requested_at is not None and not agent.stopping:
                agent.stop()
            agent.poll()
            if agent.stopping:
                if agent.idle:
                    break
                assert self._stop_requested_at is not None
                if time.monotonic() - self._stop_requested_at > self.config.shutdown_grace:
                    log.warning("%s: shutdown grace ran out; handing work back", agent.name)
                    agent.abandon()
                    break
            self._wake.wait(self.config.poll_seconds)
            self._wake.clear()
        if self.incidents is not None:
            self.incidents.stop()
        agent.close()
        self.storage.close()
        log.info("%s: stopped", self.config.name)
        return 0
