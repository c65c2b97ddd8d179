"""Delivery: which route gets which open incident, when, and by which agent.

A route (``[notify.routes.<name>]``) gets an incident at most once (its escalation is that one
post for a route with ``escalate_after``), across all agents: before sending, an agent claims the
post in the incident document with an ``If-Match`` write; only the writer that wins sends it.
Whether the post then arrived is recorded on the claim (``error``); a failed post is not retried
by another agent (the notifier already retried what was worth retrying).

When a post is due: the incident is open and not acknowledged (a person already knows), of a
kind the route takes, ``escalate_after`` has passed since it opened, and the route is not in its
quiet hours (deferred to their end). With ``digest``, what falls due within one interval of the
first due post goes out as one post.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import attrs

from fdcore.abc import Notification
from fdcore.contract.models import Incident, IncidentDelivery, IncidentDocument, IncidentState
from fdcore.incidents.book import IncidentBook
from fdcore.plugins.routes import Delivery, NotificationRoutes
from fdcore.settings.agent_toml import QuietHours, RouteConfig


@attrs.frozen
class Post:
    """One post an agent claimed: a route and the incidents it carries (several for a digest)."""

    route: RouteConfig
    incidents: tuple[Incident, ...]


def in_quiet_hours(quiet: QuietHours | None, now: datetime) -> bool:
    if quiet is None:
        return False
    local = now.astimezone(ZoneInfo(quiet.timezone)).time()
    if quiet.start <= quiet.end:
        return quiet.start <= local < quiet.end
    return local >= quiet.start or local < quiet.end  # the span wraps past midnight


def due_at(route: RouteConfig, incident: Incident) -> datetime:
    return incident.opened_at + timedelta(seconds=route.escalate_after or 0)


def due_posts(
    document: IncidentDocument, routes: Sequence[RouteConfig], now: datetime
) -> list[Post]:
    """The posts due now, one per route and incident (one per route for a digest)."""
    posts: list[Post] = []
    for route in routes:
        if in_quiet_hours(route.quiet_hours, now):
            continue
        waiting = [
            incident
            for incident in document.open
            if incident.state is IncidentState.OPEN
            and (not route.kinds or incident.kind in route.kinds)
            and route.name not in incident.notified
            and due_at(route, incident) <= now
        ]
        if not waiting:
            continue
        if route.digest is None:
            posts.extend(Post(route, (incident,)) for incident in waiting)
            continue
        first = min(due_at(route, incident) for incident in waiting)
        if now >= first + timedelta(seconds=route.digest):
            posts.append(Post(route, tuple(waiting)))
    return posts


def claim_posts(
    book: IncidentBook, routes: Sequence[RouteConfig], now: datetime, by: str
) -> list[Post]:
    """Claim the posts due now in the document (one If-Match write); the ones this agent won."""

    def edit(document: IncidentDocument) -> list[Post]:
        posts = due_posts(document, routes, now)
        for post in posts:
            for incident in post.incidents:
                incident.notified.append(post.route.name)
                incident.deliveries.append(
                    IncidentDelivery(
                        route=post.route.name,
                        at=now,
                        by=by,
                        escalation=post.route.escalate_after is not None,
                    )
                )
        return posts

    if not routes:
        return []
    return book.change(edit)


def notification(environment: str, route: RouteConfig, incident: Incident) -> Notification:
    return Notification(
        environment=environment,
        incident_id=incident.id,
        title=incident.title,
        severity=incident.severity,
        text=incident.message or incident.title,
        route=route.name,
        kind=incident.kind,
        subject=incident.subject,
        first_seen=incident.opened_at,
        last_seen=incident.last_seen or incident.opened_at,
        count=incident.count,
        ack_command=f"fdcore incidents ack {incident.id} --env {environment}",
        escalation=route.escalate_after is not None,
    )


def post_notification(environment: str, post: Post) -> Notification:
    """What is sent for ``post``: the incident, or a digest listing its incidents."""
    items = tuple(notification(environment, post.route, i) for i in post.incidents)
    if len(items) == 1 and post.route.digest is None:
        return items[0]
    return Notification(
        environment=environment,
        incident_id=",".join(item.incident_id for item in items),
        title=f"{len(items)} fdcore incident{'s' if len(items) != 1 else ''} in {environment}",
        severity=max((item.severity for item in items), key=_rank),
        text="\n".join(f"{item.incident_id}: {item.title}" for item in items),
        route=post.route.name,
        count=len(items),
        escalation=post.route.escalate_after is not None,
        digest=items,
    )


def _rank(severity: str) -> int:
    return {"info": 0, "warning": 1, "error": 2, "critical": 3}.get(severity, 2)


def send_posts(
    book: IncidentBook,
    channels: NotificationRoutes,
    environment: str,
    posts: Sequence[Post],
    now: datetime,
    by: str,
) -> list[Delivery]:
    """Send claimed posts; record on each claim why it did not arrive, if it did not."""
    deliveries = [channels.send(post_notification(environment, post)) for post in posts]
    failed = {
        (post.route.name, incident.id): delivery.error
        for post, delivery in zip(posts, deliveries, strict=True)
        if delivery.error is not None
        for incident in post.incidents
    }
    if failed:

        def edit(document: IncidentDocument) -> None:
            for incident in [*document.open, *document.resolved]:
                for record in incident.deliveries:
                    error = failed.get((record.route, incident.id))
                    if error is not None and record.by == by and record.at == now:
                        record.error = error

        book.change(edit)
    return deliveries
