"""Looking for work: the requests this agent could hold, and whether it should take them.

Each scan lists ``requests/`` and ``status/`` through the agent's mailbox index
(:mod:`fdcore.mailbox.index`), and reads only what it does not know: a request once (requests
never change), a final status once (``Holdings.final``), a status in flight when its etag moved
(where the listing carries etags); what retention removed is forgotten. Whether a holder is lost
is :mod:`.liveness`'s. docs/benchmarks.md ("Cost of a poll") states what one poll costs. Requests
already under way come first (the sweep): this agent's own, left by an earlier process; handed
back ones; and, with ``take_over``, those of lost agents. Then unclaimed requests, oldest
first: claimed as the claim policy allows, or expired past their deadline. The writes
themselves are :mod:`.status_changes`'.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fdcore.agent.components import Components
from fdcore.agent.liveness import Liveness
from fdcore.agent.settings import AgentConfig
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.work import Holdings, Work, is_held_by
from fdcore.contract.models import Request, Status
from fdcore.mailbox.access import Mailbox, Versioned
from fdcore.mailbox.index import MailboxIndex

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
        index: MailboxIndex | None = None,
    ) -> None:
        self.config = config
        self.agent = config.name
        self.mailbox = mailbox
        self.components = components
        self.instance = instance
        self.status_changes = status_changes
        self.holdings = holdings
        # What this agent knows of the mailbox: each file read again only when it changed.
        self.index = index or MailboxIndex(mailbox)
        self.liveness = Liveness(self.index, components.takeover, config.grace_seconds)
        self.skew = self.liveness.skew = skew  # this agent's clock against the store's
        # Without etags in the listing: statuses in flight held by other agents, as last read,
        # with their holder's epoch then (see _unchanged).
        self._known: dict[str, tuple[Status, int]] = {}
        self._last_sweep: datetime | None = None
        self._swept = False  # a sweep of this process looked at every status once
        self.looks = 0  # how many looks this agent made
        self.backlog = 0  # unclaimed requests for this agent the last look left for later
        self.cancels = cancels  # operators' cancels: never claim those

    def look_for_work(self, now: datetime) -> None:
        """Sweep the requests under way (when due), then claim or expire unclaimed ones."""
        self.looks += 1
        status_ids, request_ids = self._listings()
        self._forget_removed(status_ids)
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
        status_ids = set(self.index.statuses.list())
        return status_ids, set(self.index.requests.list())

    def _forget_removed(self, status_ids: set[str]) -> None:
        """Forget what was known of requests no longer listed (archived or deleted by retention):
        what this agent remembers follows the mailbox, not every request it ever saw (the index
        forgets its files on its own)."""
        self.holdings.final &= status_ids
        for request_id in self._known.keys() - status_ids:
            del self._known[request_id]

    def _sweep(self, request_ids: list[str], now: datetime) -> None:
        """Statuses no running table of ours covers: resume own, pick up handed back, take over."""
        self.liveness.new_sweep()
        if self.config.take_over:
            self.liveness.judge_all(now)
        else:
            self.liveness.look()  # who starts stopping (and hands requests back)
        if self._swept and self.liveness.by_listing and not self.liveness.suspects:
            # No agent is lost or stopping: a status never read gives no work (_unchanged).
            read = self.index.statuses.read_ids() | self.holdings.work.keys()
            read |= self.index.requests.read_ids()  # seen unclaimed: maybe claimed by this agent
            request_ids = [i for i in request_ids if i in read]
        began = self.liveness.store_now(now)
        takeable = [found for found in (self._look_at(i, now) for i in request_ids) if found]
        if not self._swept:
            self.liveness.all_read_at = began
        self._swept = True  # every status was looked at once: later sweeps may skip the unread
        # Its own requests whose answers were lost are held again first (in _look_at): they take
        # room already, so what is left goes to the others, and no request waits on a full agent.
        for found, reason in takeable:
            status = found.value
            if not self.components.claim.may_claim(self.holdings.load()):
                return
            request = self._request(status.request)
            if request is None or not self._may_hold(request):
                continue
            holder = status.agent
            if holder not in (None, self.agent) and not self.liveness.still_lost(holder):
                continue  # it wrote its record since the listing: alive (Liveness.still_lost)
            lost = status.agent is not None  # another agent, or an earlier process of this one
            self.status_changes.take_over(found, request, now, reason, lost=lost)

    def _look_at(self, request_id: str, now: datetime) -> tuple[Versioned[Status], str] | None:
        """One status of the sweep: (the status, why this agent may take it), or None."""
        if self._unchanged(request_id, now):
            return None
        self._known.pop(request_id, None)
        found = self.index.statuses.get(request_id).found
        if found is None or self._still_waiting(request_id, found):
            return None
        status = found.value
        if status.state.final:
            self.holdings.final.add(request_id)
            return None
        if status.agent not in (None, self.agent):
            self._remember(request_id, status)
        if self._made_by_this_process(status):
            # This process's own claim or takeover, whose answer a store error lost.
            request = self._request(request_id)
            if request is not None:
                self.holdings.add(Work(request, status, found.etag))
            return None
        reason = self._reason_to_take(status, now)
        return None if reason is None else (found, reason)

    def _remember(self, request_id: str, status: Status) -> None:
        """A status in flight held by another agent, with its holder's epoch: trusted while that
        epoch stays (:meth:`_unchanged`). Not where the listing's etags say what changed, nor,
        record by record, without take_over: such sweeps are stale_after apart, too far to
        trust a status."""
        by_listing = self.liveness.by_listing
        if not by_listing and (self.index.versioned or not self.config.take_over):
            return
        assert status.agent is not None
        self.liveness.record(status.agent)
        self._known[request_id] = (status, self.liveness.epoch(status.agent))

    def _unchanged(self, request_id: str, now: datetime) -> bool:
        """True if the status as last read still tells all: no need to read or judge it again.

        A status in flight names its holder, and only that holder changes it (a table done,
        the finish, a hand back), or another agent once the holder is lost. None of the
        holder's own changes gives this agent work but a hand back, and a holder hands back
        only once its record says ``stopping``. So a status read while its holder was live is
        trusted while that holder's epoch has not moved (:mod:`.liveness`: the same process,
        neither stopping nor stopped, with no silence longer than its ``stale_after`` in which
        another agent could have judged it lost and taken the request over) and it is not lost.
        Judged by the listing, that holds whether or not its etag moved since, and a status
        never read is read only when an agent that is lost or stopping may hold it. Where the
        listing has etags but the store no clock, a status is trusted while its etag stays.
        """
        if request_id in self.holdings.work:
            return False
        if self.liveness.by_listing:
            return self._unchanged_by_listing(request_id, now)
        if self.index.versioned:
            return self._unchanged_by_etag(request_id, now)
        return self._trusted(request_id, now)

    def _trusted(self, request_id: str, now: datetime) -> bool:
        """The status as read is trusted: its holder's epoch has not moved, nor is it lost."""
        known = self._known.get(request_id)
        if known is None:
            return False
        status, epoch = known
        holder = status.agent
        assert holder is not None
        return (
            self.liveness.record(holder) is not None
            and self.liveness.epoch(holder) == epoch
            and not (self.config.take_over and self.liveness.lost(holder, now))
        )

    def _unchanged_by_listing(self, request_id: str, now: datetime) -> bool:
        statuses = self.index.statuses
        entry = statuses.known(request_id)
        if entry is None:
            # Read once if this agent saw the request unclaimed (its own claim or takeover may
            # have landed with its answer lost), or an agent lost or stopping may hold it.
            listed = statuses.listed.get(request_id)
            return (
                self._swept
                and listed is not None
                and self.index.requests.known(request_id) is None
                and not self.liveness.may_hold(request_id, listed.modified)
            )
        if request_id not in self._known:
            return entry.value is None and not statuses.changed(request_id)  # malformed
        return self._trusted(request_id, now)

    def _unchanged_by_etag(self, request_id: str, now: datetime) -> bool:
        entry = self.index.statuses.known(request_id)
        if entry is None or entry.value is None or self.index.statuses.changed(request_id):
            return False
        holder = entry.value.agent
        if holder in (None, self.agent) or entry.value.state.final:
            return False
        return not self.config.take_over or not self.liveness.lost(holder, now)

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

    def _reason_to_take(self, status: Status, now: datetime) -> str | None:
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
        if not self.liveness.lost(holder, now):
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
        return self.index.requests.get(request_id).value
