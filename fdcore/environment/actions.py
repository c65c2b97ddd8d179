"""Opening an environment, and what an operator does to it: cancel or retry a request,
acknowledge an incident; and its incidents as ``fdcore incidents list`` shows them.

The commands (``fdcore cancel``, ``retry``, ``incidents``) and the monitor's buttons call these,
so an action from the page is recorded exactly as one from the terminal.
"""

from __future__ import annotations

from datetime import datetime

from fdcore.abc import TakeoverPolicy
from fdcore.contract.codec import MAX_FILE_BYTES
from fdcore.contract.models import Incident
from fdcore.incidents.book import IncidentBook, acknowledge
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import TAKEOVER, load_plugins


def open_mailbox(
    url: str, *, create: bool = False, max_file_bytes: int = MAX_FILE_BYTES
) -> Mailbox:
    """The mailbox of the environment at ``url`` through its installed storage plugin, each read
    bounded by ``max_file_bytes``. ``create=False`` (for whatever only reads or acts on what is
    there): a missing environment is :class:`~fdcore.errors.EnvironmentNotFound`, never a new
    empty one."""
    return Mailbox(load_plugins().open_storage(url, create=create), max_file_bytes=max_file_bytes)


def lost_agent_policy() -> TakeoverPolicy:
    """The takeover policy whose idea of a lost agent the views show (``stale_record``)."""
    return load_plugins().get(TAKEOVER, "stale_record")


def incidents(mailbox: Mailbox, include_resolved: bool = True) -> list[Incident]:
    """The open incidents, then (with ``include_resolved``) the resolved ones, newest first."""
    document = IncidentBook(mailbox).read()
    return document.open + (list(reversed(document.resolved)) if include_resolved else [])


def acknowledge_incident(mailbox: Mailbox, incident: str, now: datetime, by: str) -> Incident:
    """Acknowledge the open incident with id or key ``incident`` as ``by``
    (``fdcore incidents ack``); :class:`~fdcore.errors.ConfigError` if there is none."""
    return IncidentBook(mailbox).change(lambda d: acknowledge(d, incident, now, by))
