"""The incident document, ``incidents/incidents.json``: one per environment, changed only by
``If-Match`` read-modify-write with bounded retry, so evaluators racing to open the same incident
make exactly one, and racing on different keys lose none.

The edits (:func:`report`, :func:`resolve_cleared`, :func:`acknowledge`, ...) are plain functions
on an :class:`~fdcore.contract.models.IncidentDocument`; :meth:`IncidentBook.change` applies one
and writes it back, again from a fresh read whenever another writer got there first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

import attrs

from fdcore.contract.codec import to_dict
from fdcore.contract.layout import INCIDENTS
from fdcore.contract.models import (
    Incident,
    IncidentDocument,
    IncidentNote,
    IncidentState,
)
from fdcore.errors import AlreadyExists, ConfigError, FdcoreError, NotFound, PreconditionFailed
from fdcore.mailbox.access import Mailbox, Versioned

R = TypeVar("R")

#: Rounds of read-modify-write before giving up: each lost round means another writer won one,
#: so this bounds the writers racing at once, with room to spare.
ATTEMPTS = 30
#: The longest pause between rounds (jittered, so racers spread out).
MAX_PAUSE = 0.2


class IncidentConflict(FdcoreError):
    """The incident document kept changing under us: too many writers at once."""

    def __init__(self, attempts: int) -> None:
        super().__init__(
            f"{INCIDENTS}: changed by other writers on each of {attempts} attempts; try again"
        )


@attrs.frozen
class Finding:
    """Something wrong now, as an evaluation sees it: the subject of an incident of ``kind``."""

    kind: str
    subject: str
    title: str
    message: str | None = None
    since: datetime | None = None  # when the condition began, if known
    severity: str = "error"

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.subject}"


class IncidentBook:
    """Reads and changes one environment's incident document."""

    def __init__(
        self,
        mailbox: Mailbox,
        *,
        attempts: int = ATTEMPTS,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self.mailbox = mailbox
        self.attempts = attempts
        self.pause = pause

    def read(self) -> IncidentDocument:
        """The document as it is (empty if none was written yet). Raises MailboxFileError."""
        found = self.mailbox.read(IncidentDocument, INCIDENTS)
        return found.value if found is not None else IncidentDocument()

    def change(self, edit: Callable[[IncidentDocument], R]) -> R:
        """Apply ``edit`` to a fresh copy and write it with If-Match (create-if-absent for the
        first); repeat from a fresh read if another writer got there first. Returns what the
        successful ``edit`` returned; a document ``edit`` left unchanged is not written."""
        for attempt in range(self.attempts):
            if attempt:
                self.pause(random.uniform(0, MAX_PAUSE * min(1.0, attempt / 5)))
            found: Versioned[IncidentDocument] | None = self.mailbox.read(
                IncidentDocument, INCIDENTS
            )
            document = found.value if found is not None else IncidentDocument()
            before = to_dict(document)
            result = edit(document)
            trim(document)
            while document.resolved and not self.mailbox.fits(INCIDENTS, document):
                del document.resolved[0]  # the oldest resolved first: within the size bound
            if to_dict(document) == before and found is not None:
                return result
            try:
                if found is None:
                    self.mailbox.create(INCIDENTS, document)
                else:
                    self.mailbox.replace(INCIDENTS, document, found.etag)
            except (AlreadyExists, PreconditionFailed, NotFound):
                continue
            return result
        raise IncidentConflict(self.attempts)


# -- edits ---------------------------------------------------------------------------------------


def trim(document: IncidentDocument) -> None:
    """Keep the last RESOLVED_KEPT resolved incidents (newest last)."""
    kept = IncidentDocument.RESOLVED_KEPT
    if len(document.resolved) > kept:
        del document.resolved[: len(document.resolved) - kept]


def find_open(document: IncidentDocument, key: str) -> Incident | None:
    return next((incident for incident in document.open if incident.key == key), None)


def report(document: IncidentDocument, finding: Finding, now: datetime, by: str) -> Incident | None:
    """Open an incident for ``finding``, or update the open one with its key (no second one):
    seen now, and one occurrence more if the condition began anew since (:func:`_occurred`).

    None if an incident with its key was resolved after the condition began: a person (or the
    condition clearing) already dealt with this occurrence; it is not reopened.
    """
    incident = find_open(document, finding.key)
    if incident is not None:
        incident.count += _occurred(incident, finding)
        incident.last_seen = now
        if finding.message:
            incident.message = finding.message
        return incident
    if finding.since is not None and any(
        old.key == finding.key and old.resolved_at is not None and old.resolved_at >= finding.since
        for old in document.resolved
    ):
        return None
    document.last_number = max(document.last_number, _highest_number(document)) + 1
    incident = Incident(
        id=f"inc-{document.last_number:04d}",
        key=finding.key,
        title=finding.title,
        opened_at=now,
        opened_by=by,
        severity=finding.severity,
        kind=finding.kind,
        subject=finding.subject,
        message=finding.message,
        last_seen=now,
        began_at=finding.since,
    )
    document.open.append(incident)
    return incident


def _occurred(incident: Incident, finding: Finding) -> int:
    """1 if ``finding`` is a new occurrence of the open ``incident``'s condition, else 0.

    An incident counts occurrences, not the evaluations that saw one: a failed request stays one
    failure however often it is read, a lost agent one lost spell until it comes back. A
    condition that began after the occurrence counted last (an agent back and lost again
    between two evaluations: a later ``since``) is a new one. Without a start time (a schedule
    conflict, an objective, or an incident of an older document) it is the same occurrence.
    """
    if finding.since is None:
        return 0
    if incident.began_at is None:
        incident.began_at = finding.since  # the occurrence it was opened for: counted already
        return 0
    if finding.since <= incident.began_at:
        return 0
    incident.began_at = finding.since
    return 1


def _highest_number(document: IncidentDocument) -> int:
    """The highest ``inc-<n>`` in the document (one written without ``last_number``)."""
    numbers = [0]
    for incident in [*document.open, *document.resolved]:
        prefix, _, digits = incident.id.partition("-")
        if prefix == "inc" and digits.isdigit():
            numbers.append(int(digits))
    return max(numbers)


def close(document: IncidentDocument, incident: Incident, now: datetime, by: str) -> None:
    """Move an open incident to the resolved list."""
    incident.state = IncidentState.RESOLVED
    incident.resolved_at = now
    incident.resolved_by = by
    document.open.remove(incident)
    document.resolved.append(incident)


def resolve_cleared(
    document: IncidentDocument,
    kinds: Iterable[str],
    still_wrong: Iterable[str],
    unknown: Iterable[str],
    now: datetime,
    by: str,
    *,
    judged: Iterable[str] = (),
) -> list[Incident]:
    """Resolve the open incidents of ``kinds`` (or with a key in ``judged``) whose key is neither
    still wrong nor unknown (its input could not be read). Kinds not listed were not evaluated
    and are left alone."""
    kinds, keep, judged = set(kinds), {*still_wrong, *unknown}, set(judged)
    cleared = [
        i for i in document.open if (i.kind in kinds or i.key in judged) and i.key not in keep
    ]
    for incident in cleared:
        close(document, incident, now, by)
    return cleared


def lookup(document: IncidentDocument, ref: str) -> Incident:
    """The incident with id or key ``ref`` (open first, then the newest resolved)."""
    for incident in [*document.open, *reversed(document.resolved)]:
        if ref in (incident.id, incident.key):
            return incident
    raise ConfigError("fdcore incidents", "INCIDENT", f"no incident {ref!r} in {INCIDENTS}")


def acknowledge(document: IncidentDocument, ref: str, now: datetime, by: str) -> Incident:
    incident = lookup(document, ref)
    if incident.state is IncidentState.OPEN and incident in document.open:
        incident.state = IncidentState.ACKNOWLEDGED
        incident.acknowledged_at = now
        incident.acknowledged_by = by
    return incident


def resolve(document: IncidentDocument, ref: str, now: datetime, by: str) -> Incident:
    incident = lookup(document, ref)
    if incident in document.open:
        close(document, incident, now, by)
    return incident


def add_note(document: IncidentDocument, ref: str, text: str, now: datetime, by: str) -> Incident:
    incident = lookup(document, ref)
    incident.notes.append(IncidentNote(at=now, by=by, text=text))
    return incident
