"""The monitor's read-only answers: each page (and its live fragment), the JSON and ``/metrics``.

One method of :class:`Pages` per route, each a plain function of the request run off the event
loop (:func:`fdcore_monitor.app.guarded`). Every page is a template over the rows of
:mod:`fdcore.environment`; its live part alone is served with ``?fragment=1`` (the page's
script swaps it in every few seconds). The JSON answers are those of the commands' ``--json``.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import jinja2
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.templating import Jinja2Templates

from fdcore.contract.codec import to_dict
from fdcore.environment import AuditRow, CostReport, QueueFilter, RequestStory
from fdcore.errors import InvalidId, MailboxFileError, RequestNotFound, StorageUnavailable
from fdcore_monitor.actions import TOKEN_HEADER, Actions
from fdcore_monitor.metrics import REQUEST_STATES, oldest_waiting_seconds, registry
from fdcore_monitor.snapshot import Source
from fdcore_monitor.timeline import timeline_svg

REFRESH_SECONDS = 2.0
#: The actions a request's row offers (with --allow-actions); acknowledge is an incident's.
REQUEST_ACTIONS = ("cancel", "retry")
AUDIT_ROWS = 50  # a request page's newest audit events
AUDIT_DAYS = 366  # the most days of the archive a request page lists for them
PAGE_ROWS = 100  # rows of a queue page: the newest that match its filters, then the next page


@attrs.frozen
class Settings:
    source: Source
    environment: str  # its URL, as given
    actions: Actions
    bound_to: str  # the --host address: on loopback only loopback names may reach it
    refresh: float = REFRESH_SECONDS


def since(value: datetime | None, now: datetime) -> str:
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


def templates() -> Jinja2Templates:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("fdcore_monitor", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.globals["since"] = since
    environment.filters["clock"] = lambda v: f"{v:%Y-%m-%d %H:%M:%S}" if v else "-"
    return Jinja2Templates(env=environment)


def queue_filter(request: Request) -> QueueFilter:
    """The queue's filters from the query: ``state``, ``schedule``, ``agent``, ``q`` (id)."""
    params = request.query_params
    return QueueFilter(
        state=params.get("state", ""),
        schedule=params.get("schedule", ""),
        agent=params.get("agent", ""),
        text=params.get("q", "").strip(),
    )


def page_number(request: Request) -> int:
    """``?page=N`` (1 the first); anything else is the first page."""
    text = request.query_params.get("page", "1")
    return max(1, int(text)) if text.isdigit() else 1


class Pages:
    """The read-only routes of one monitor: each reads through its source's environment."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.source = settings.source
        self.templates = templates()
        self.metrics_registry = registry(settings.source)

    def render(self, name: str, request: Request, context: dict[str, Any]) -> Response:
        """Page ``name`` (its live part alone with ``?fragment=1``) with ``context``."""
        fragment = request.query_params.get("fragment") == "1"
        template = f"_{name}.html" if fragment else f"{name}.html"
        base = {
            "page": name,
            "environment": self.settings.environment,
            "actions": self.settings.actions.allowed,
            "refresh": self.settings.refresh,
            "token_header": TOKEN_HEADER,
            "request_actions": REQUEST_ACTIONS,
        }
        return self.templates.TemplateResponse(request, template, {**base, **context})

    def agents(self, request: Request) -> Response:
        fleet = self.source.fleet()
        context = {
            "fleet": fleet,
            "agent_states": Counter(row.state for row in fleet.agents),
            "request_states": Counter(row.state for row in fleet.requests),
            "oldest_waiting": oldest_waiting_seconds(fleet),
        }
        return self.render("agents", request, context)

    def queue(self, request: Request) -> Response:
        where = queue_filter(request)
        fleet = self.source.fleet(where, (page_number(request) - 1) * PAGE_ROWS, PAGE_ROWS)
        shown = fleet.queue
        context = {
            "fleet": fleet,
            "shown": shown,
            "rows": shown.rows,
            "where": where,
            "page_number": shown.offset // PAGE_ROWS + 1,
            "states": ["active", *REQUEST_STATES],
            "agent_states": fleet.agent_states(),
        }
        return self.render("queue", request, context)

    def schedules(self, request: Request) -> Response:
        return self.render("schedules", request, {"fleet": self.source.fleet()})

    def incidents(self, request: Request) -> Response:
        now = datetime.now(timezone.utc)
        return self.render("incidents", request, {"incidents": self.source.incidents(), "now": now})

    def _story(self, request: Request) -> RequestStory | tuple[int, str]:
        """The request's story, or the HTTP status and line saying why there is none."""
        try:
            return self.source.environment.request(request.path_params["id"])
        except (InvalidId, RequestNotFound) as exc:
            return 404, str(exc)
        except MailboxFileError as exc:  # a malformed file of it: the line `fdcore show` prints
            return 422, str(exc)

    def request(self, request: Request) -> Response:
        story = self._story(request)
        if isinstance(story, tuple):
            return PlainTextResponse(f"fdcore monitor: {story[1]}", status_code=story[0])
        now = datetime.now(timezone.utc)
        svg = timeline_svg(story.attempts, story.runs, now)
        context = {"story": story, "timeline": svg, "now": now, "audit": None, "cost": None}
        if request.query_params.get("fragment") != "1":  # outside the live part: read once
            context["audit"] = self._audit(story, now)
            context["cost"] = self._cost(story)
        return self.render("request", request, context)

    def _audit(self, story: RequestStory, now: datetime) -> list[AuditRow] | None:
        """The request's audit events, archived ones too (a listing a day of its life, at most
        :data:`AUDIT_DAYS`); None if the store did not answer."""
        created = story.request.created_at if story.request else now
        since = max(created - timedelta(minutes=5), now - timedelta(days=AUDIT_DAYS))
        try:
            page = self.source.environment.audit(
                request=story.id, limit=AUDIT_ROWS, since=since, archived=True
            )
        except StorageUnavailable:
            return None
        return page.rows

    def _cost(self, story: RequestStory) -> CostReport | None:
        """What the request's table runs cost (``fdcore cost``'s figures for it); None if its
        files could not be read."""
        try:
            return self.source.environment.cost(request=story.id, by="run")
        except (StorageUnavailable, MailboxFileError):
            return None

    def api_request(self, request: Request) -> Response:
        story = self._story(request)
        if isinstance(story, tuple):
            return JSONResponse({"error": story[1]}, status_code=story[0])
        return JSONResponse(story.to_json())

    def api_rows(self, request: Request) -> Response:
        what = request.path_params["what"]
        fleet = self.source.fleet(queue_filter(request) if what == "queue" else None)
        if what == "agents":
            rows: list[Any] = fleet.agents
        elif what == "queue":
            rows = fleet.requests  # those the filters select, oldest first
            what = "requests"
        elif what == "schedules":
            rows = fleet.schedules
        else:
            return JSONResponse({"error": f"no list {what!r}"}, status_code=404)
        return JSONResponse({what: [row.to_json() for row in rows], "warnings": fleet.warnings})

    def api_incidents(self, request: Request) -> Response:
        return JSONResponse({"incidents": [to_dict(i) for i in self.source.incidents()]})

    def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.metrics_registry), media_type=CONTENT_TYPE_LATEST)
