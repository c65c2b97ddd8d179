"""Objectives (``[[incidents.objectives]]``): a table's or a schedule's success rate over a window
below its target, or its last success older than its freshness bound.

Only what ended within the longest window or freshness bound is read (the statuses updated then,
and their run logs or requests), so an evaluation's reads stay bounded by recent work. An
objective whose run log or requests could not be read is not judged: its incident neither opens
nor resolves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from fdcore.contract.models import OBJECTIVE, Outcome, RunRecord, State, Status
from fdcore.durations import format_duration
from fdcore.errors import MailboxFileError, StorageUnavailable
from fdcore.incidents.book import Finding
from fdcore.mailbox.access import Mailbox
from fdcore.settings.agent_toml import Objective


def objective_key(objective: Objective) -> str:
    return f"{OBJECTIVE}:{objective.subject}"


def _schedule_of(mailbox: Mailbox, status: Status) -> str | None:
    found = mailbox.request(status.request)
    if found is None or found.value.schedule is None:
        return None
    return found.value.schedule.id


def look_at_objectives(
    mailbox: Mailbox,
    statuses: Sequence[Status],
    objectives: Sequence[Objective],
    now: datetime,
) -> tuple[list[Finding], set[str], list[str]]:
    """(findings, keys judged, problems) for ``objectives`` over the recent ``statuses``."""
    if not objectives:
        return [], set(), []
    longest = max(max(o.window if o.success_rate else 0, o.freshness or 0) for o in objectives)
    recent = [s for s in statuses if s.updated_at >= now - timedelta(seconds=longest)]
    problems: list[str] = []
    runs = None
    if any(o.table is not None for o in objectives):
        runs = _recent_runs(mailbox, recent, problems)
    by_schedule = None
    if any(o.schedule is not None for o in objectives):
        by_schedule = _ended_by_schedule(mailbox, recent, problems)
    findings, judged = [], set()
    for objective in objectives:
        ended = _ended(objective, runs, by_schedule)
        if ended is None:
            continue  # what it is judged from could not be read: neither opened nor resolved
        judged.add(objective_key(objective))
        breaches = breached(objective, ended, now)
        if breaches:
            findings.append(_finding(objective, breaches))
    return findings, judged, problems


def _recent_runs(
    mailbox: Mailbox, recent: Sequence[Status], problems: list[str]
) -> list[RunRecord] | None:
    """The run logs of the recent requests; None (and the problem noted) if one is unreadable."""
    runs: list[RunRecord] = []
    for status in recent:
        try:
            runs.extend(mailbox.runs(status.request, strict=True))
        except (MailboxFileError, StorageUnavailable) as exc:
            problems.append(f"run log of {status.request} unreadable: {exc}")
            return None
    return runs


def _ended_by_schedule(
    mailbox: Mailbox, recent: Sequence[Status], problems: list[str]
) -> dict[str, list[Status]] | None:
    """The recent final statuses by their request's schedule; None (and the problem noted) if a
    request is unreadable."""
    by_schedule: dict[str, list[Status]] = {}
    for status in recent:
        if not status.state.final:
            continue
        try:
            schedule = _schedule_of(mailbox, status)
        except (MailboxFileError, StorageUnavailable) as exc:
            problems.append(f"request {status.request} unreadable: {exc}")
            return None
        if schedule is not None:
            by_schedule.setdefault(schedule, []).append(status)
    return by_schedule


def _ended(
    objective: Objective,
    runs: list[RunRecord] | None,
    by_schedule: dict[str, list[Status]] | None,
) -> list[tuple[datetime, bool]] | None:
    """(ended at, succeeded) of each of the objective's runs or requests; None if unread."""
    if objective.table is not None:
        if runs is None:
            return None
        return [
            (run.ended_at, run.outcome is Outcome.SUCCEEDED)
            for run in runs
            if run.table == objective.table and run.outcome is not Outcome.RUNNING
        ]
    if by_schedule is None:
        return None
    return [
        (status.updated_at, status.state is State.SUCCEEDED)
        for status in by_schedule.get(str(objective.schedule), [])
    ]


def _finding(objective: Objective, breaches: list[str]) -> Finding:
    what = f"Table {objective.table}" if objective.table else f"Schedule {objective.schedule}"
    return Finding(
        OBJECTIVE,
        objective.subject,
        f"{what} misses its objective",
        "; ".join(breaches),
        severity="warning",
    )


def breached(
    objective: Objective, ended: Sequence[tuple[datetime, bool]], now: datetime
) -> list[str]:
    """What ``objective`` misses, given (ended at, succeeded) of each run or request."""
    breaches = []
    if objective.success_rate is not None:
        since = now - timedelta(seconds=objective.window)
        outcomes = [ok for at, ok in ended if at >= since]
        if outcomes:
            rate = sum(outcomes) / len(outcomes)
            if rate < objective.success_rate:
                breaches.append(
                    f"success rate {rate:.0%} over the last {format_duration(objective.window)} "
                    f"({sum(outcomes)} of {len(outcomes)}), below {objective.success_rate:.0%}"
                )
    if objective.freshness is not None:
        bound = now - timedelta(seconds=objective.freshness)
        if not any(ok and at >= bound for at, ok in ended):
            breaches.append(f"no success in the last {format_duration(objective.freshness)}")
    return breaches
