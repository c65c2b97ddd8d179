"""Notification routes: each ``[notify.routes.<name>]`` opened with its notifier at start-up, and
one way to send a :class:`~fdcore.abc.Notification` that never raises.

A notifier talks to something outside fdcore (a log, a Teams channel) that may be down or refuse
a message. Its failure must not stop the caller (an agent's poll, a command), so :meth:`send`
catches it and returns it as a :class:`Delivery`. It is reported nowhere else: the caller reports
it once, where it knows what the failure means (``fdcore notify test`` prints it).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from fdcore.abc import Notification, NotifierChannel
from fdcore.errors import ConfigError
from fdcore.plugins.manager import NOTIFIER, Plugins
from fdcore.settings.agent_toml import AgentConfig


@attrs.frozen
class Delivery:
    """How sending one notification to one route went."""

    route: str
    notifier: str | None  # None: no such route
    error: str | None = None  # one line saying why it was not delivered

    @property
    def delivered(self) -> bool:
        return self.error is None


@attrs.frozen
class Route:
    """A configured route with its notifier's open channel."""

    name: str
    notifier: str
    channel: NotifierChannel


class NotificationRoutes:
    """The agent's notification routes, by name. Sending never raises."""

    def __init__(self, routes: Iterable[Route] = ()) -> None:
        self._routes = {route.name: route for route in routes}

    @property
    def names(self) -> list[str]:
        """The route names, in the order of agent.toml."""
        return list(self._routes)

    def send(self, notification: Notification) -> Delivery:
        """Send ``notification`` to the route it names; a failure comes back in the Delivery."""
        route = self._routes.get(notification.route)
        if route is None:
            known = ", ".join(self._routes) or "none configured"
            return Delivery(notification.route, None, f"no such route (routes: {known})")
        try:
            route.channel.send(notification)
        except Exception as exc:  # whatever a notifier raises, the caller carries on
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            return Delivery(route.name, route.notifier, error)
        return Delivery(route.name, route.notifier)


def open_routes(config: AgentConfig, plugins: Plugins) -> NotificationRoutes:
    """Open each configured route with the notifier it names; errors fail here, at start-up.

    An unknown notifier is the usual PluginError (naming the distribution to install); options a
    notifier cannot use are a ConfigError naming the file and the route.
    """
    routes = []
    for route in config.routes:
        notifier = plugins.get(NOTIFIER, route.notifier)
        try:
            channel = notifier.open(route.name, dict(route.options))
        except ValueError as exc:
            raise ConfigError(config.source, f"[notify.routes.{route.name}]", str(exc)) from None
        routes.append(Route(route.name, route.notifier, channel))
    return NotificationRoutes(routes)
