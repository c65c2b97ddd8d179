"""The monitor's web application (Starlette): its routes, the guard around each handler and the
security headers of every answer.

The handlers are methods of :class:`~fdcore_monitor.pages.Pages` (pages, fragments, JSON,
``/metrics``) and :class:`~fdcore_monitor.actions.ActionRoutes` (the buttons' POSTs). Every
asset is served from this package; the Content-Security-Policy forbids any other origin.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib.resources import files
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fdcore.errors import FdcoreError
from fdcore_monitor.actions import ActionRoutes
from fdcore_monitor.pages import Pages, Settings

__all__ = ["LOOPBACK", "SECURITY_HEADERS", "SecurityHeaders", "Settings", "create_app", "routes"]

log = logging.getLogger("fdcore.monitor")

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
SECURITY_HEADERS = {
    # every asset from this monitor; no frame of it inside another site's page
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Callable[[Request], Response]) -> Handler:
    """Run ``handler`` off the event loop (storage reads block); a storage or mailbox error is a
    503 naming it, never a crash of the monitor."""

    async def run(request: Request) -> Response:
        try:
            return await run_in_threadpool(handler, request)
        except FdcoreError as exc:
            log.warning("monitor: %s: %s", request.url.path, exc)
            if request.url.path.startswith(("/api/", "/actions/")):
                return JSONResponse({"error": str(exc)}, status_code=503)
            return PlainTextResponse(f"fdcore monitor: {exc}", status_code=503)

    return run


def routes(settings: Settings) -> list[BaseRoute]:
    """Every route of the monitor, each to its handler."""
    pages = Pages(settings)
    act = ActionRoutes(settings.actions, settings.source.environment)
    post = ["POST"]
    static = Path(str(files("fdcore_monitor") / "static"))
    return [
        Route("/", guarded(pages.agents)),
        Route("/queue", guarded(pages.queue)),
        Route("/schedules", guarded(pages.schedules)),
        Route("/incidents", guarded(pages.incidents)),
        Route("/requests/{id}", guarded(pages.request)),
        Route("/api/incidents", guarded(pages.api_incidents)),
        Route("/api/requests/{id}", guarded(pages.api_request)),
        Route("/api/{what}", guarded(pages.api_rows)),
        Route("/metrics", guarded(pages.metrics)),
        Route("/actions/incidents/{id}/acknowledge", guarded(act.acknowledge), methods=post),
        Route("/actions/requests/{id}/cancel", guarded(act.cancel), methods=post),
        Route("/actions/requests/{id}/retry", guarded(act.retry), methods=post),
        Mount("/static", StaticFiles(directory=static), name="static"),
    ]


def create_app(settings: Settings) -> Starlette:
    middleware = [Middleware(SecurityHeaders)]
    if settings.bound_to in LOOPBACK:
        # a page of another site that rebinds its name to 127.0.0.1 cannot read this one
        hosts = ["127.0.0.1", "localhost", "[::1]"]
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    return Starlette(routes=routes(settings), middleware=middleware)


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_secured)
