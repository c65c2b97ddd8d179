"""Looking for work: the requests this agent could hold, and whether it should take them.

Each scan lists ``requests/`` and ``status/``. Requests already under way come first (the
sweep): this agent's own, left by an earlier process; handed back ones; and, with ``take_over``,
those of lost agents. Then unclaimed requests, oldest first: claimed as the claim policy allows,
or expired past their deadline. The writes themselves are :mod:`.status_changes`'.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fdcore.agent.components import Components
from fdcore.agent.settings import AgentConfig
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.work import Holdings, Work, is_held_by
from fdcore.contract.layout import agent_key, request_key
from fdcore.contract.models import AgentRecord, Request, Status
from fdcore.mailbox.access import Mailbox, Versioned

if TYPE_CHECKING:
    from fdcore.agent.cancels import Cancels


class Discovery:
    """Finds requests to claim, resume, pick up, take over or expire."""

    def __init__(
        self,
        config: AgentConfig,
        mailbox: Mailbox,
        parts: Components,
        instance: str,
        status_changes: StatusChanges,
        holdings: Holdings,
    ) -> None:
        self.config = config
        self.agent = config.name
        self.mailbox = mailbox
        self.parts = parts
        self.instance = instance
        self.status_changes = status_changes
        self.holdings = holdings
        self._requests: dict[str, Request] = {}  # requests never change once written
        self._last_sweep: datetime | None = None
        self.looks = 0  # how many looks this agent made
        self.backlog = 0  # unclaimed requests for this agent the last look left for later
        self.skew: ClockSkew | None = None  # this agent's clock against the store's
        self.cancels: Cancels | None = None  # operators' cancels: never claim those

    def look_for_work(self, now: datetime) -> None:
        """Sweep the requests under way (when due), then claim or expire unclaimed ones."""
        self.looks += 1
        request_ids = set(self.mailbox.request_ids())
        status_ids = set(self.mailbox.status_ids())
        # The sweep runs every poll with take_over, else once per stale_after.
        sweep_due = self._last_sweep is None or now - self._last_sweep >= timedelta(
            seconds=self.config.stale_after
        )
        # Requests already under way (own ones left by an earlier process, lost agents' ones)
        # come before new ones: claimed first, new requests would take the free workers and
        # leave them waiting for as long as new requests keep coming.
        if self.config.take_over or sweep_due:
            self._last_sweep = now
            # Held requests that wait for a worker are looked at too: one this agent held
            # through a pause may have moved meanwhile (and its new holder may be lost now).
            busy = {key for key, work in self.holdings.work.items() if work.running or work.run}
            candidates = (status_ids & request_ids) - self.holdings.final - busy
            self._sweep(sorted(candidates), now)
        self._claim_unclaimed(sorted(request_ids - status_ids), now)

    def _sweep(self, request_ids: list[str], now: datetime) -> None:
        """Statuses no running table of ours covers: resume own, pick up handed back, take over."""
        records: dict[str, AgentRecord | None] = {}  # each holder's record, read once per sweep
        for request_id in request_ids:
            found = self.status_changes.read(request_id)
            if found is None or self._still_waiting(request_id, found):
                continue
            status = found.value
            if status.state.final:
                self.holdings.final.add(request_id)
                continue
            if self._made_by_this_process(status):
                # This process's own claim or takeover, whose answer a store error lost.
                request = self._request(request_id)
                if request is not None:
                    self.holdings.add(Work(request, status, found.etag))
                continue
            reason = self._reason_to_take(status, now, records)
            if reason is None:
                continue
            if not self.parts.claim.may_claim(self.holdings.load()):
                return
            request = self._request(status.request)
            if request is None or not self._may_hold(request):
                continue
            lost = status.agent is not None  # another agent, or an earlier process of this one
            self.status_changes.take_over(found, request, now, reason, lost=lost)

    def _still_waiting(self, request_id: str, found: Versioned[Status]) -> bool:
        """A request held waiting for a worker: True if still ours, else drop it (False).

        One held through a pause may have been taken over meanwhile (finding 8).
        """
        waiting = self.holdings.work.get(request_id)
        if waiting is None:
            return False
        if is_held_by(found.value, self.agent, waiting.status.attempt):
            waiting.status, waiting.etag = found.value, found.etag
            return True
        self.holdings.drop(waiting, "status names another agent")
        return False

    def _made_by_this_process(self, status: Status) -> bool:
        """The status's latest attempt is this process's (each attempt names its instance)."""
        return (
            status.agent == self.agent
            and bool(status.attempts)
            and status.attempts[-1].instance == self.instance
        )

    def _reason_to_take(
        self, status: Status, now: datetime, records: dict[str, AgentRecord | None]
    ) -> str | None:
        """Why this agent may take a non-final status it does not hold; None if it may not."""
        holder = status.agent
        if holder == self.agent:
            return "left by an earlier process of this agent"
        if holder is None:
            return "handed back"
        if not self.config.take_over:
            return None
        if self.skew is not None and self.skew.refuses_takeover:
            return None  # a clock this far off could judge a live agent lost (ClockSkew warns)
        if holder not in records:
            record = self.mailbox.read_or_report(AgentRecord, agent_key(holder))
            records[holder] = record.value if record else None
        if not self.parts.takeover.is_lost(records[holder], now, self.config.grace_seconds):
            return None
        return f"agent {holder} is lost"

    def _claim_unclaimed(self, request_ids: list[str], now: datetime) -> None:
        """Oldest first: expire those past their deadline, claim others as the policy allows."""
        requests = [r for r in map(self._request, request_ids) if r is not None]
        requests.sort(key=lambda r: (r.created_at, r.id))
        self.backlog = 0
        for request in requests:
            if self.cancels is not None and self.cancels.end_unclaimed(request.id, now):
                continue
            if request.deadline is not None and now > request.deadline:
                self.status_changes.expire(request, now)
                continue
            if not self._may_hold(request):
                continue
            if not self.parts.claim.may_claim(self.holdings.load()):
                self.backlog += 1  # a worker that frees may take it at once (Agent.react)
                continue  # keep going: later requests may still need expiring
            self.status_changes.claim(request, now)

    def _may_hold(self, request: Request) -> bool:
        """A request with an affinity (an unshared schedule's) is for that agent only."""
        return request.affinity is None or request.affinity == self.agent

    def _request(self, request_id: str) -> Request | None:
        """The request (read once: requests never change); None if absent or unreadable."""
        cached = self._requests.get(request_id)
        if cached is None:
            key = request_key(request_id)
            found = self.mailbox.read_or_report(Request, key)
            if found is None:
                return None
            if found.value.id != request_id:
                self.mailbox.problems.report(
                    key, f"{key}: field 'id': {found.value.id!r} does not match the file name"
                )
                return None
            cached = self._requests[request_id] = found.value
        return cached
