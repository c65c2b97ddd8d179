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
from collections.abc import Callable, Mapping
from types import FrameType

import attrs

from fdcore.abc import TableJob, TableRun, WaitableRun, WatchableStorage
from fdcore.agent.components import StartTable, build_components
from fdcore.agent.core import Agent
from fdcore.agent.schedules import build_schedules
from fdcore.clock import Clock, SystemClock
from fdcore.contract.layout import LEASES, REQUESTS, STATUS
from fdcore.contract.models import AgentRecord
from fdcore.incidents.watch import watch_incidents
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.mailbox.counting import CountingStore
from fdcore.plugins.manager import Plugins, load_plugins
from fdcore.plugins.storage import open_environment
from fdcore.pricing import KINDS, MONTH_SECONDS, PRICES, cost, store_of
from fdcore.settings.agent_toml import AgentConfig

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


# A table run that cannot be waited on (a plugin runner without ``wait``) is looked at this often.
RUN_TICK_SECONDS = 0.02
# Woken for a due slot (or a lease's end) this long after it, so it is due on the agent's clock too.
DUE_MARGIN_SECONDS = 0.001


#: How often a running agent logs its store operations since it started.
OPERATIONS_LOG_SECONDS = 3600.0


def operations_line(counts: Mapping[str, int], seconds: float, url: str) -> str:
    """The store operations since the start by kind, and on a priced store what they cost and
    would cost in a month at this rate (fdcore.pricing): what an operator checks the bill by."""
    line = "store operations since start: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in KINDS)
    store = store_of(url)
    if store is None:
        return line
    dollars = cost(counts, PRICES[store])
    month = dollars * MONTH_SECONDS / seconds if seconds > 0 else 0.0
    return f"{line}; at {store} prices ${dollars:.4f}, about ${month:.2f} a month at this rate"


class AgentRuntime:
    """Runs one agent until it is told to stop (SIGTERM, SIGINT, or :meth:`request_stop`).

    The agent polls every ``poll_seconds``; between polls the runtime sleeps until something
    happens and then lets the agent react at once (:meth:`Agent.react`): a table run ended (a
    thread waits on each), a schedule's slot fell due, a table lease a request waits for ran
    out, or the storage saw a request submitted, a lease written or a status changed (backends
    that can watch, see docs/agents.md). Nothing else wakes it.
    """

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
        # Every store call counted by kind: logged hourly and at the stop (operations_line).
        self.storage = CountingStore(open_environment(config, plugins, create=config.create))
        self._started = time.monotonic()
        self._waitable_kinds: dict[type, bool] = {}  # _waitable's answers, by kind of run
        self._operations_logged = self._started
        components = build_components(config, plugins, self.storage, start_table)
        self.clock = clock or SystemClock()
        self.agent = Agent(
            config,
            Mailbox(self.storage, ProblemLog(config.name), max_file_bytes=config.max_file_bytes),
            attrs.evolve(components, start_table=self._waking(components.start_table)),
            self.clock,
            previous_process_gone=same_host_process_gone,
            schedules=build_schedules(config, plugins),
        )
        self._wake = threading.Event()
        self._new_work = threading.Event()
        self._closing = threading.Event()  # stops the storage watcher
        self._stop_requested_at: float | None = None
        # [incidents] enabled: evaluation and delivery on a thread of their own (docs/incidents.md)
        self.incidents = watch_incidents(
            config, plugins, clock or SystemClock(), self.agent.components.notify
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

    def _waking(self, start: StartTable) -> StartTable:
        """The agent's table starter, with a thread per run that wakes the loop when it ends."""

        def start_table(job: TableJob) -> TableRun:
            run = start(job)
            if self._waitable(run):
                threading.Thread(target=self._wake_after, args=(run,), daemon=True).start()
            return run

        return start_table

    def _waitable(self, run: TableRun) -> bool:
        """Whether ``run`` can be waited on (WaitableRun), asked once per kind of run: a
        runtime-checkable protocol's isinstance walks its members at every call, and the loop
        asks at each turn for every run."""
        kind = type(run)
        known = self._waitable_kinds.get(kind)
        if known is None:
            known = self._waitable_kinds[kind] = isinstance(run, WaitableRun)
        return known

    def _wake_after(self, run: WaitableRun) -> None:
        run.wait()
        self._wake.set()

    def _on_submitted(self) -> None:
        self._new_work.set()
        self._wake.set()

    def _watch_mailbox(self) -> None:
        """Have the storage say when a request is submitted, and when a lease is written or a
        status changes (a lease a request here waits for may be free: released, or freed by
        its request's finish), if it can; else polls find them."""
        if not isinstance(self.storage, WatchableStorage):
            return
        storage = self.storage

        def watch(prefix: str, changed: Callable[[], None], what: str) -> None:
            try:
                storage.watch(prefix, changed, self._closing)
            except Exception as exc:
                log.warning("%s: not watching for %s: %s", self.config.name, what, exc)

        for prefix, changed, what in (
            (REQUESTS, self._on_submitted, "new requests"),
            (LEASES, self._wake.set, "freed leases"),
            (STATUS, self._wake.set, "finished requests"),
        ):
            threading.Thread(
                target=watch, args=(prefix, changed, what), name=f"watch-{prefix}", daemon=True
            ).start()

    def _sleep_seconds(self, next_poll: float) -> float:
        """Until the next poll, the next due slot or lease a request waits for running out, or
        a tick while an unwaitable run runs."""
        seconds = next_poll - time.monotonic()
        wake = self.agent.next_wake(self.clock.now())
        if wake is not None:
            until = (wake - self.clock.now()).total_seconds() + DUE_MARGIN_SECONDS
            seconds = min(seconds, until)
        held = self.agent.held.values()
        if any(w.run is not None and not self._waitable(w.run) for w in held):
            seconds = min(seconds, RUN_TICK_SECONDS)
        return max(seconds, 0.0)

    def _log_operations(self) -> None:
        self._operations_logged = time.monotonic()
        line = operations_line(
            self.storage.by_kind(), self._operations_logged - self._started, self.storage.url
        )
        log.info("%s: %s", self.config.name, line)

    def run(self) -> int:
        """Poll until stopped and idle (or the shutdown grace runs out); return the exit code."""
        agent = self.agent
        log.info("%s: running on %s", self.config.name, self.storage.url)
        if self.incidents is not None:
            self.incidents.start()
        self._watch_mailbox()
        next_poll = time.monotonic()
        while True:
            # Cleared before the step: a run ending during it wakes the next wait at once.
            self._wake.clear()
            stop_now = self._stop_requested_at is not None and not agent.stopping
            if stop_now:
                agent.stop()
            # A stop polls at once: its record says "stopping" and waiting requests go back.
            if stop_now or time.monotonic() >= next_poll:
                self._new_work.clear()  # the poll looks anyway
                agent.poll()
                next_poll = time.monotonic() + self.config.poll_seconds
            else:
                new_work = self._new_work.is_set()
                self._new_work.clear()
                agent.react(new_work=new_work)
            if agent.stopping:
                if agent.idle:
                    break
                assert self._stop_requested_at is not None
                if time.monotonic() - self._stop_requested_at > self.config.shutdown_grace:
                    log.warning("%s: shutdown grace ran out; handing work back", agent.name)
                    agent.abandon()
                    break
            if time.monotonic() - self._operations_logged >= OPERATIONS_LOG_SECONDS:
                self._log_operations()
            self._wake.wait(self._sleep_seconds(next_poll))
        self._closing.set()
        if self.incidents is not None:
            self.incidents.stop()
        agent.close()
        self.storage.close()
        self._log_operations()
        log.info("%s: stopped", self.config.name)
        return 0
