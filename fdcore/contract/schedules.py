"""What the copies of one schedule, held by several agents, must agree on, and how a schedule's
tables read in every view.

An agent publishes each of its schedules in its record (:class:`~.models.ScheduleInfo`, with a
fingerprint of what must match); ``fdcore schedules`` warns, and incident evaluation opens
``schedule_conflict``, from :func:`schedule_conflicts` over those records.
"""

from __future__ import annotations

from fdcore.contract.models import ScheduleInfo

__all__ = ["ALL_TABLES", "schedule_conflicts", "tables_text"]

ALL_TABLES = "all"  # the one "table" of a schedule whose entities list is empty


def tables_text(entities: list[str] | None) -> str:
    """A schedule's tables as every view shows them: ``unknown`` where its record does not say
    (an older agent's), never every table; ``all`` for an empty list."""
    if entities is None:
        return "unknown"
    return ",".join(entities) or ALL_TABLES


def schedule_conflicts(copies: dict[str, list[tuple[str, ScheduleInfo]]]) -> dict[str, str]:
    """Schedule id -> what operators must hear about its copies across agents (name, copy).

    "Scheduled in two places": an unshared schedule held by two agents runs on both. "Shared
    schedule differs": copies of a shared schedule disagree (timing, tables), so the agents would
    make different requests. A properly shared schedule raises neither. ``fdcore schedules``
    prints these as warnings; incident evaluation opens ``schedule_conflict`` for them.
    """
    conflicts = {}
    for schedule_id, held in sorted(copies.items()):
        names = ", ".join(name for name, _ in held)
        if len(held) > 1 and not any(info.shared for _, info in held):
            conflicts[schedule_id] = (
                f"Scheduled in two places: schedule {schedule_id} is not shared but is held by "
                f"{names}; each of them runs it (set shared = true on every copy)"
            )
        elif len({info.fingerprint for _, info in held}) > 1:
            versions = "; ".join(
                f"{name}: {'shared' if info.shared else 'not shared'}, {info.when}, "
                f"tables {tables_text(info.entities)}"
                for name, info in held
            )
            conflicts[schedule_id] = f"Shared schedule differs: schedule {schedule_id}: {versions}"
    return conflicts
