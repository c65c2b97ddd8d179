"""The monitor's web application (Starlette): pages, their live fragments, JSON, ``/metrics``.

Every page is a template over the rows of :mod:`fdcore.cli.views`. A page's live part is also
served alone (``?fragment=1``): the page's script swaps it in every few seconds, so the page
updates without a reload. The JSON answers (``/api/...``) are those of the commands' ``--json``.
Every asset is served from this package; the Content-Security-Policy forbids any other origin.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import attrs
import jinja2
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fdcore.cli.views import QueueRow, request_story
from fdcore.contract.codec import to_dict
from fdcore.errors import FdcoreError, InvalidId, MailboxFileError, UnknownRequest
from fdcore.mailbox.cancel import cancel_request
from fdcore.mailbox.submit import retry_request
from fdcore_monitor.actions import TOKEN_HEADER, Actions, Refused, acknowledge_incident
from fdcore_monitor.metrics import REQUEST_STATES, oldest_waiting_seconds, registry
from fdcore_monitor.snapshot import Source
from fdcore_monitor.timeline import timeline_svg

log = logging.getLogger("fdcore.monitor")

REFRESH_SECONDS = 2.0
#: The actions a request's row offers (with --allow-actions); acknowledge is an incident's.
REQUEST_ACTIONS = ("cancel", "retry")
QUEUE_LIMIT = 500  # rows of the queue page: the newest that match its filters
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
SECURITY_HEADERS = {
    # every asset from this monitor; no frame of it inside another site's page
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@attrs.frozen
class Settings:
    source: Source
    environment: str  # its URL, as given
    actions: Actions
    bound_to: str  # the --host address: on loopback only loopback names may reach it
    refresh: float = REFRESH_SECONDS


def _since(value: datetime | None, now: datetime) -> str:
    """``12 s ago``, ``in 3 min``: a moment relative to the page's reading."""
    if value is None:
        return "-"
    seconds = (now - value).total_seconds()
    size = abs(seconds)
    text = (
        f"{size:.0f} s"
        if size < 120
        else f"{size / 60:.0f} min"
        if size < 7200
        else f"{size / 3600:.1f} h"
        if size < 172800
        else f"{size / 86400:.0f} d"
    )
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def _templates() -> Jinja2Templates:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("fdcore_monitor", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.globals["since"] = _since
    environment.filters["clock"] = lambda v: f"{v:%Y-%m-%d %H:%M:%S}" if v else "-"
    return Jinja2Templates(env=environment)


def filter_requests(rows: list[QueueRow], state: str, schedule: str) -> list[QueueRow]:
    """The queue page's filters: ``state`` a request state, ``active`` (not final) or empty;
    ``schedule`` a schedule id, ``none`` (submitted by hand) or empty."""
    if state == "active":
        rows = [row for row in rows if row.state in ("waiting", "accepted", "running")]
    elif state:
        rows = [row for row in rows if row.state == state]
    if schedule == "none":
        rows = [row for row in rows if row.schedule is None]
    elif schedule:
        rows = [row for row in rows if row.schedule == schedule]
    return rows


Handler = Callable[[Request], Awaitable[Response]]


def create_app(settings: Settings) -> Starlette:
    templates = _templates()
    source = settings.source
    metrics = registry(source)

    def page(name: str, request: Request, context: dict[str, Any]) -> Response:
        fragment = request.query_params.get("fragment") == "1"
        template = f"_{name}.html" if fragment else f"{name}.html"
        base = {
            "page": name,
            "environment": settings.environment,
            "actions": settings.actions.allowed,
            "refresh": settings.refresh,
            "token_header": TOKEN_HEADER,
            "request_actions": REQUEST_ACTIONS,
        }
        return templates.TemplateResponse(request, template, {**base, **context})

    def guarded(handler: Callable[[Request], Response]) -> Handler:
        """Run ``handler`` off the event loop (storage reads block); a storage or mailbox error
        is a 503 naming it, never a crash of the monitor."""

        async def run(request: Request) -> Response:
            try:
                return await run_in_threadpool(handler, request)
            except FdcoreError as exc:
                log.warning("monitor: %s: %s", request.url.path, exc)
                if request.url.path.startswith(("/api/", "/actions/")):
                    return JSONResponse({"error": str(exc)}, status_code=503)
                return PlainTextResponse(f"fdcore monitor: {exc}", status_code=503)

        return run

    def agents_page(request: Request) -> Response:
        fleet = source.fleet()
        context = {
            "fleet": fleet,
            "agent_states": Counter(row.state for row in fleet.agents),
            "request_states": Counter(row.state for row in fleet.requests),
            "oldest_waiting": oldest_waiting_seconds(fleet),
        }
        return page("agents", request, context)

    def queue_page(request: Request) -> Response:
        fleet = source.fleet()
        state = request.query_params.get("state", "")
        schedule = request.query_params.get("schedule", "")
        rows = filter_requests(fleet.requests, state, schedule)
        context = {
            "fleet": fleet,
            "rows": list(reversed(rows))[:QUEUE_LIMIT],
            "matching": len(rows),
            "state": state,
            "schedule": schedule,
            "states": ["active", *REQUEST_STATES],
            "schedules": sorted({row.schedule for row in fleet.requests if row.schedule}),
            "counts": Counter(row.state for row in fleet.requests),
            "agent_states": fleet.agent_states(),
        }
        return page("queue", request, context)

    def schedules_page(request: Request) -> Response:
        return page("schedules", request, {"fleet": source.fleet()})

    def incidents_page(request: Request) -> Response:
        now = datetime.now(timezone.utc)
        return page("incidents", request, {"incidents": source.incidents(), "now": now})

    def request_page(request: Request) -> Response:
        try:
            story = request_story(source.mailbox, request.path_params["id"])
        except (InvalidId, UnknownRequest) as exc:
            return PlainTextResponse(f"fdcore monitor: {exc}", status_code=404)
        except MailboxFileError as exc:  # a malformed file of it: the line `fdcore show` prints
            return PlainTextResponse(f"fdcore monitor: {exc}", status_code=422)
        now = datetime.now(timezone.utc)
        svg = timeline_svg(story.attempts, story.runs, now)
        return page("request", request, {"story": story, "timeline": svg, "now": now})

    def api_request(request: Request) -> Response:
        try:
            story = request_story(source.mailbox, request.path_params["id"])
        except (InvalidId, UnknownRequest) as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except MailboxFileError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        return JSONResponse(story.to_json())

    def api_rows(request: Request) -> Response:
        what = request.path_params["what"]
        fleet = source.fleet()
        if what == "agents":
            rows: list[Any] = fleet.agents
        elif what == "queue":
            params = request.query_params
            rows = filter_requests(
                fleet.requests, params.get("state", ""), params.get("schedule", "")
            )
            what = "requests"
        elif what == "schedules":
            rows = fleet.schedules
        else:
            return JSONResponse({"error": f"no list {what!r}"}, status_code=404)
        return JSONResponse({what: [row.to_json() for row in rows], "warnings": fleet.warnings})

    def api_incidents(request: Request) -> Response:
        return JSONResponse({"incidents": [to_dict(i) for i in source.incidents()]})

    def scrape(request: Request) -> Response:
        return Response(generate_latest(metrics), media_type=CONTENT_TYPE_LATEST)

    def action(
        request: Request, name: str, subject: str, act: Callable[[datetime], str]
    ) -> Response:
        client = request.client.host if request.client else "?"
        try:
            message = settings.actions.run(
                name, subject, request.headers.get(TOKEN_HEADER), client, act
            )
        except Refused as exc:
            return JSONResponse({"error": str(exc)}, status_code=403)
        except FdcoreError as exc:  # the mailbox refused: a final request, an unknown id...
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse({"message": message})

    def acknowledge_action(request: Request) -> Response:
        incident = request.path_params["id"]
        by = settings.actions.by
        return action(
            request,
            "acknowledge",
            incident,
            lambda now: acknowledge_incident(source.mailbox, incident, now, by),
        )

    def cancel_action(request: Request) -> Response:
        request_id = request.path_params["id"]
        by = settings.actions.by

        def cancel(now: datetime) -> str:
            done = cancel_request(
                source.mailbox, request_id, by=by, reason="from fdcore monitor", now=now
            )
            if not done.created:
                return f"{request_id} was already cancelled by {done.cancel.by}: {done.state}"
            return f"{request_id} cancelled by {by}: {done.state}"

        return action(request, "cancel", request_id, cancel)

    def retry_action(request: Request) -> Response:
        request_id = request.path_params["id"]
        by = settings.actions.by

        def retry(now: datetime) -> str:
            new = retry_request(source.mailbox, request_id, by=by, now=now)
            return f"{request_id} retried by {by} as {new.id}"

        return action(request, "retry", request_id, retry)

    static = Path(str(files("fdcore_monitor") / "static"))
    routes = [
        Route("/", guarded(agents_page)),
        Route("/queue", guarded(queue_page)),
        Route("/schedules", guarded(schedules_page)),
        Route("/incidents", guarded(incidents_page)),
        Route("/requests/{id}", guarded(request_page)),
        Route("/api/incidents", guarded(api_incidents)),
        Route("/api/requests/{id}", guarded(api_request)),
        Route("/api/{what}", guarded(api_rows)),
        Route("/metrics", guarded(scrape)),
        Route("/actions/incidents/{id}/acknowledge", guarded(acknowledge_action), methods=["POST"]),
        Route("/actions/requests/{id}/cancel", guarded(cancel_action), methods=["POST"]),
        Route("/actions/requests/{id}/retry", guarded(retry_action), methods=["POST"]),
        Mount("/static", StaticFiles(directory=static), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if settings.bound_to in LOOPBACK:
        # a page of another site that rebinds its name to 127.0.0.1 cannot read this one
        hosts = ["127.0.0.1", "localhost", "[::1]"]
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    return Starlette(routes=routes, middleware=middleware)


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
