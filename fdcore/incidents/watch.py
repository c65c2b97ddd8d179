"""The agent's incident timer: evaluate, then deliver, every ``[incidents] every``, on a thread of
its own so a slow mailbox or a hanging webhook never delays the agent's poll.

It uses its own storage connection (the agent's is not shared across threads), reports each new
failure once, and never lets an exception end the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from fdcore.abc import Storage
from fdcore.clock import Clock
from fdcore.incidents.book import IncidentBook
from fdcore.incidents.delivery import claim_posts, send_posts
from fdcore.incidents.evaluate import evaluate
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.mailbox.index import MailboxIndex
from fdcore.mailbox.verdict import AgentVerdicts
from fdcore.plugins.manager import Plugins
from fdcore.plugins.routes import NotificationRoutes
from fdcore.plugins.storage import open_environment
from fdcore.settings.agent_toml import AgentConfig, RouteConfig

log = logging.getLogger("fdcore.incidents")


class IncidentWatch:
    """Evaluates one environment and delivers its incidents, on a timer."""

    def __init__(
        self,
        config: AgentConfig,
        storage: Storage,
        channels: NotificationRoutes,
        clock: Clock,
        routes: Sequence[RouteConfig] | None = None,
    ) -> None:
        self.config = config
        self.storage = storage
        self.book = IncidentBook(
            Mailbox(storage, ProblemLog(config.name), max_file_bytes=config.max_file_bytes)
        )
        # What this evaluator read, kept across evaluations: a file is read again when it changed.
        self.index = MailboxIndex(self.book.mailbox)
        self.verdicts = AgentVerdicts()  # the takeover policies, loaded once for every tick
        self.channels = channels
        self.routes = tuple(config.routes if routes is None else routes)
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: str | None = None
        self._route_failing: dict[str, str | None] = {}

    def _report_delivery(self, route: str, error: str | None) -> None:
        """A route's failure is logged when it starts or changes, not on every post."""
        if error is not None and error != self._route_failing.get(route):
            log.warning("incident post to route %s failed: %s", route, error)
        elif error is None and self._route_failing.get(route) is not None:
            log.info("incident posts to route %s deliver again", route)
        self._route_failing[route] = error

    def tick(self) -> None:
        """One evaluation and delivery. Never raises: a failure is logged once until it clears."""
        try:
            now = self.clock.now()
            outcome = evaluate(
                self.book,
                now,
                self.config.grace_seconds,
                self.config.name,
                self.config.incidents.objectives,
                self.config.incidents.lookback,
                self.index,
                self.verdicts,
            )
            for incident in outcome.opened:
                log.warning("incident %s opened: %s", incident.id, incident.title)
            for incident in outcome.resolved:
                log.info("incident %s resolved: %s", incident.id, incident.title)
            posts = claim_posts(self.book, self.routes, now, self.config.name)
            for delivery in send_posts(
                self.book, self.channels, self.config.environment, posts, now, self.config.name
            ):
                if delivery.error is not None:
                    log.warning(
                        "incident post to route %s failed: %s", delivery.route, delivery.error
                    )
        except Exception as exc:  # the timer outlives any failure; the agent's poll is unaffected
            failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if failure != self._failing:
                log.warning("incidents not evaluated, will retry: %s", failure)
            self._failing = failure
            return
        if self._failing is not None:
            log.info("incidents evaluated again")
            self._failing = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fdcore-incidents", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.config.incidents.every)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the timer; wait at most ``timeout`` for a tick under way (it is bounded anyway)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.storage.close()


def watch_incidents(
    config: AgentConfig, plugins: Plugins, clock: Clock, channels: NotificationRoutes
) -> IncidentWatch | None:
    """The agent's incident timer if ``[incidents] enabled``, sending through the agent's routes
    (opened at start-up) and with a storage connection of its own; None when off."""
    if not config.incidents.enabled:
        return None
    storage = open_environment(config, plugins)  # the agent opened (or created) it already
    return IncidentWatch(config, storage, channels, clock)
