"""Takeover and fencing, asserted: what a test checks after a fleet ran on a store.

Each ``assert_*`` helper raises :class:`AssertionError` naming what it saw, so a failure reads
well under any test runner (pytest does not rewrite asserts in this module, hence no ``assert``
statements). The table-write helpers read the log of :mod:`fdcore.testing.tables`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import pairwise

from fdcore.cli.fleet import wait_until
from fdcore.contract.models import Attempt, Outcome, State
from fdcore.mailbox.access import Mailbox
from fdcore.testing.tables import TableWrite

__all__ = [
    "assert_each_table_succeeded_once",
    "assert_no_double_writers",
    "assert_taken_over",
    "double_writers",
    "holder",
    "successful_runs",
]


def double_writers(
    writes: Iterable[TableWrite], *, rejected_too: bool = False
) -> list[tuple[TableWrite, TableWrite]]:
    """Pairs of accepted writes to one table whose time spans overlap, by different writers.

    A writer is a run: agent, request, attempt and token. Two runs that were handed the same
    token (a lease generation that restarted) are two writers too. ``rejected_too`` counts the
    runs whose write the fencing check refused as well: what the lease alone must keep apart
    (a table that writes to a system that ignores the token).
    """
    by_table: dict[str, list[TableWrite]] = defaultdict(list)
    for write in writes:
        if (rejected_too or not write.rejected) and not write.killed:
            by_table[write.table].append(write)
    overlaps = []
    for spans in by_table.values():
        spans.sort(key=lambda w: w.start)
        longest = spans[0]  # of the spans so far, the one that ends last
        for span in spans[1:]:
            if span.start < longest.end and _writer(span) != _writer(longest):
                overlaps.append((longest, span))
            if span.end > longest.end:
                longest = span
    return overlaps


def _writer(write: TableWrite) -> tuple[str, str, int, int]:
    return (write.agent, write.request, write.attempt, write.token)


def assert_no_double_writers(writes: Iterable[TableWrite]) -> None:
    """No table had two writers at once: accepted writes under different tokens never overlap."""
    overlaps = double_writers(writes)
    if overlaps:
        pairs = "; ".join(
            f"{a.table}: {a.agent} (token {a.token}) and {b.agent} (token {b.token})"
            for a, b in overlaps
        )
        raise AssertionError(f"{len(overlaps)} tables written by two agents at once: {pairs}")


def holder(mailbox: Mailbox, request_id: str) -> str | None:
    """The agent running ``request_id`` now; None unless its status is ``running``."""
    status = mailbox.status(request_id)
    if status is None or status.value.state is not State.RUNNING:
        return None
    return status.value.agent


def _taken_from(mailbox: Mailbox, request_id: str, victim: str) -> Attempt | None:
    """The attempt that followed ``victim``'s lost attempt at ``request_id``, if one did."""
    status = mailbox.status(request_id)
    attempts = status.value.attempts if status else []
    for lost, taking in pairwise(attempts):
        if lost.agent == victim and lost.outcome is Outcome.LOST:
            return taking
    return None


def assert_taken_over(
    mailbox: Mailbox, request_id: str, victim: str, *, within: float, timeout: float
) -> Attempt:
    """Another agent takes ``request_id`` over from ``victim``, within ``within`` seconds of the
    victim's last heartbeat (its record's ``updated_at``); returns the taking attempt.

    Call it once the victim can no longer write (killed, or stopped with SIGSTOP): it reads the
    victim's record first, then waits up to ``timeout`` real seconds for the takeover.
    """
    record = mailbox.agent(victim)
    if record is None:
        raise AssertionError(f"agent {victim!r} has no record in the mailbox")
    last_seen = record.value.updated_at
    # Attempts are only ever appended, so once the taking attempt is there it stays there.
    if not wait_until(lambda: _taken_from(mailbox, request_id, victim) is not None, timeout):
        status = mailbox.status(request_id)
        seen = status.value if status else "no status"
        raise AssertionError(
            f"request {request_id!r} was not taken over from {victim!r} within {timeout} s: {seen}"
        )
    attempt = _taken_from(mailbox, request_id, victim)
    assert attempt is not None  # for mypy: found just above
    if attempt.agent == victim:
        raise AssertionError(f"request {request_id!r} was resumed by {victim!r}, not taken over")
    delay = (attempt.started_at - last_seen).total_seconds()
    if delay > within:
        raise AssertionError(
            f"request {request_id!r} was taken over by {attempt.agent!r} {delay:.2f} s after "
            f"{victim!r}'s last heartbeat, later than {within} s"
        )
    return attempt


def successful_runs(mailbox: Mailbox, request_id: str) -> Counter[str]:
    """How many runs of each table of ``request_id`` succeeded, from its run log."""
    return Counter(r.table for r in mailbox.runs(request_id) if r.outcome is Outcome.SUCCEEDED)


def assert_each_table_succeeded_once(mailbox: Mailbox, request_id: str) -> None:
    """Every table ``request_id`` names has exactly one successful run, and nothing else has."""
    request = mailbox.request(request_id)
    if request is None:
        raise AssertionError(f"request {request_id!r} is not in the mailbox")
    expected = Counter(dict.fromkeys(request.value.entities, 1))
    done = successful_runs(mailbox, request_id)
    if done != expected:
        raise AssertionError(
            f"request {request_id!r}: successful runs per table {dict(done)}, "
            f"expected each of {request.value.entities} once"
        )
