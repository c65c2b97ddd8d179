"""Looking for work: the requests this agent could hold, and whether it should take them.

Each scan lists ``requests/`` and ``status/``, and reads only what it does not know: a request
once (requests never change), a final status once (``Holdings.final``); what retention removed
is forgotten. docs/benchmarks.md ("Cost of a poll") states what one poll costs. Requests
already under way come first (the sweep): this agent's own, left by an earlier process; handed
back ones; and, with ``take_over``, those of lost agents. Then unclaimed requests, oldest
first: claimed as the claim policy allows, or expired past their deadline. The writes
themselves are :mod:`.status_changes`'.
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
        components: Components,
        instance: str,
        status_changes: StatusChanges,
        holdings: Holdings,
        *,
        skew: ClockSkew,
        cancels: Cancels,
    ) -> None:
        self.config = config
        self.agent = config.name
        self.mailbox = mailbox
        self.components = components
        self.instance = instance
        self.status_changes = status_changes
        self.holdings = holdings
        self._requests: dict[str, Request] = {}  # requests never change once written
        # Statuses in flight held by other agents, as last read, with their holder's epoch then;
        # and each holder's epoch with its record as last read (see _unchanged).
        self._known: dict[str, tuple[Status, int]] = {}
        self._epochs: dict[str, tuple[int, AgentRecord | None]] = {}
        self._last_sweep: datetime | None = None
        self.looks = 0  # how many looks this agent made
        self.backlog = 0  # unclaimed requests for this agent the last look left for later
        self.skew = skew  # this agent's clock against the store's
        self.cancels = cancels  # operators' cancels: never claim those

    def look_for_work(self, now: datetime) -> None:
        """Sweep the requests under way (when due), then claim or expire unclaimed ones."""
        self.looks += 1
        status_ids, request_ids = self._listings()
        self._forget_removed(request_ids, status_ids)
        # The sweep runs every poll with take_over, else once per stale_after.
        sweep_due = self._last_sweep is None or now - self._last_sweep >= timedelta(
            seconds=self.config.stale_after
        )
        # Requests already under way (own ones left by an earlier process, lost agents' ones)
        # come before new ones: claimed first, new requests would take the free workers and
        # leave them waiting for as long as new requests keep coming.
        if self.config.take_over or sweep_due:
            self._last_sweep = now
            # Held requests that wait (for a worker, or for a table's lease) are looked at too:
            # one this agent held through a pause may have moved meanwhile (and its new holder
            # may be lost now). One whose table runs or holds its lease re-reads its status at
            # each lease renewal instead.
            busy = {key for key, work in self.holdings.work.items() if work.run or work.lease}
            candidates = (status_ids & request_ids) - self.holdings.final - busy
            self._sweep(sorted(candidates), now)
        self._claim_unclaimed(sorted(request_ids - status_ids), now)

    def _listings(self) -> tuple[set[str], set[str]]:
        """The ids in ``status/``, then in ``requests/``: in this order. Retention deletes a
        request before its status, so a request listed after its status was not had no status
        then (docs/retention.md). The other order could list a request, then miss the status a
        move deleted meanwhile, and claim a request that had ended."""
        status_ids = set(self.mailbox.status_ids())
        return status_ids, set(self.mailbox.request_ids())

    def _forget_removed(self, request_ids: set[str], status_ids: set[str]) -> None:
        """Forget what was known of requests no longer listed (archived or deleted by retention):
        what this agent remembers follows the mailbox, not every request it ever saw."""
        self.holdings.final &= status_ids
        for request_id in self._requests.keys() - request_ids:
            del self._requests[request_id]
        for request_id in self._known.keys() - status_ids:
            del self._known[request_id]

    def _sweep(self, request_ids: list[str], now: datetime) -> None:
        """Statuses no running table of ours covers: resume own, pick up handed back, take over."""
        records: dict[str, AgentRecord | None] = {}  # each holder's record, read once per sweep
        takeable: list[tuple[Versioned[Status], str]] = []
        for request_id in request_ids:
            if self._unchanged(request_id, now, records):
                continue
            self._known.pop(request_id, None)
            found = self.status_changes.read(request_id)
            if found is None or self._still_waiting(request_id, found):
                continue
            status = found.value
            if status.state.final:
                self.holdings.final.add(request_id)
                continue
            if self.config.take_over and status.agent not in (None, self.agent):
                # Remembered with take_over only: its sweep reads the holders' records at every
                # poll anyway. Without, sweeps are stale_after apart, too far to trust a status.
                assert status.agent is not None
                self._record_of(status.agent, records)
                self._known[request_id] = (status, self._epochs[status.agent][0])
            if self._made_by_this_process(status):
                # This process's own claim or takeover, whose answer a store error lost.
                request = self._request(request_id)
                if request is not None:
                    self.holdings.add(Work(request, status, found.etag))
                continue
            reason = self._reason_to_take(status, now, records)
            if reason is not None:
                takeable.append((found, reason))
        # Its own requests whose answers were lost are held again first: they take room already,
        # so what is left goes to the others, and no request waits on a full agent.
        for found, reason in takeable:
            status = found.value
            if not self.components.claim.may_claim(self.holdings.load()):
                return
            request = self._request(status.request)
            if request is None or not self._may_hold(request):
                continue
            lost = status.agent is not None  # another agent, or an earlier process of this one
            self.status_changes.take_over(found, request, now, reason, lost=lost)

    def _unchanged(
        self, request_id: str, now: datetime, records: dict[str, AgentRecord | None]
    ) -> bool:
        """True if the status as last read still tells all: no need to read it again.

        A status in flight names its holder, and only that holder changes it (a table done,
        the finish, a hand back), or another agent once the holder is lost. None of the
        holder's own changes gives this agent work but a hand back, and a holder hands back
        only once its record says ``stopping``. So a status read while its holder was live is
        trusted while that holder's record, read at every sweep, shows the same process,
        neither stopping nor stopped nor lost, with no silence between two reads longer than
        its ``stale_after`` (in which another agent could have judged it lost and taken the
        request over): the holder's epoch has not moved.
        """
        known = self._known.get(request_id)
        if known is None or request_id in self.holdings.work:
            return False
        status, epoch = known
        holder = status.agent
        assert holder is not None
        record = self._record_of(holder, records)
        return (
            record is not None
            and self._epochs[holder][0] == epoch
            and not self.components.takeover.is_lost(record, now, self.config.grace_seconds)
        )

    def _record_of(self, holder: str, records: dict[str, AgentRecord | None]) -> AgentRecord | None:
        """The holder's record, read once per sweep; moves the holder's epoch when the record
        shows something that may have moved its statuses (see :meth:`_unchanged`)."""
        if holder in records:
            return records[holder]
        found = self.mailbox.read_or_report(AgentRecord, agent_key(holder))
        record = records[holder] = found.value if found else None
        epoch, before = self._epochs.get(holder, (0, None))
        if record is None or before is None or not _continues(before, record):
            epoch += 1
        self._epochs[holder] = (epoch, record)
        return record

    def _still_waiting(self, request_id: str, found: Versioned[Status]) -> bool:
        """A request held waiting (for a worker or its table's lease): True if still ours, else
        drop it (False).

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
        if self.skew.refuses_takeover:
            return None  # a clock this far off could judge a live agent lost (ClockSkew warns)
        record = self._record_of(holder, records)
        if not self.components.takeover.is_lost(record, now, self.config.grace_seconds):
            return None
        return f"agent {holder} is lost"

    def _claim_unclaimed(self, request_ids: list[str], now: datetime) -> None:
        """Oldest first: expire those past their deadline, claim others as the policy allows."""
        requests = [r for r in map(self._request, request_ids) if r is not None]
        requests.sort(key=lambda r: (r.created_at, r.id))
        self.backlog = 0
        for request in requests:
            if self.cancels.end_unclaimed(request.id, now):
                continue
            if request.deadline is not None and now > request.deadline:
                self.status_changes.expire(request, now)
                continue
            if not self._may_hold(request):
                continue
            if not self.components.claim.may_claim(self.holdings.load()):
                self.backlog += 1  # a worker that frees may take it at once (Agent.react)
                continue  # keep going: later requests may still need expiring
            # With a worker free the request starts in this poll: created running at once.
            free = self.holdings.load().running < self.config.concurrency
            self.status_changes.claim(request, now, start=free)

    def _may_hold(self, request: Request) -> bool:
        """A request with an affinity (an unshared schedule's) is for that agent only."""
        return request.affinity is None or request.affinity == self.agent

    def _request(self, request_id: str) -> Request | None:
        """The request (read once: requests never change); None if absent or unreadable."""
        cached = self._requests.get(request_id)
        if cached is None:
            key = request_key(request_id)
            found = self.mailbox.read_or_report(Request, key)  # its id checked against its name
            if found is None:
                return None
            cached = self._requests[request_id] = found.value
        return cached


def _continues(before: AgentRecord, after: AgentRecord) -> bool:
    """``after`` is the same live process's record as ``before``, not silent for longer than its
    ``stale_after`` in between (a later version, at most that much later), neither stopping nor
    stopped."""
    gap = (after.updated_at - before.updated_at).total_seconds()
    return (
        after.instance is not None
        and after.instance == before.instance
        and not after.stopping
        and after.stopped_at is None
        and 0 <= gap <= after.stale_after
    )
