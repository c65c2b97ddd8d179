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

A poll of an agent that knows of no open request (it holds nothing, none is unclaimed, every
status it saw is final) reads the change signal (:mod:`fdcore.mailbox.signal`) instead of
listing: it lists only when a new request was announced, or when its last full listing is
:data:`FULL_LOOK_SECONDS` old (what nobody announced: a writer of an earlier release, or one
that died before its announcement). Work in flight anywhere is open to it (it saw the request
when it was submitted), so it looks as before, every poll, until that work is final. A poll of
an agent whose claim policy takes nothing now lists nothing either: it could take nothing; it
reads the signal, so that the first worker to free looks at once for work announced meanwhile.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from fdcore.agent.components import Components
from fdcore.agent.liveness import Liveness
from fdcore.agent.skew import ClockSkew
from fdcore.agent.status_changes import StatusChanges
from fdcore.agent.work import Holdings, Work, is_held_by
from fdcore.contract.codec import LATEST
from fdcore.contract.models import Request, Status
from fdcore.mailbox.access import Mailbox, Versioned
from fdcore.mailbox.index import Folder, MailboxIndex
from fdcore.mailbox.signal import FULL_LOOK_SECONDS, QuietLook
from fdcore.settings.agent_toml import AgentConfig

__all__ = ["FULL_LOOK_SECONDS", "Discovery"]

if TYPE_CHECKING:
    from fdcore.agent.cancels import Cancels

EARLIEST = datetime.min.replace(tzinfo=timezone.utc)  # where an unreadable request sorts


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
        ready: Callable[[], bool] = lambda: True,
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
        # Statuses in flight held by other agents, as last read, with their holder's epoch then
        # (see _unchanged); the same ids by holder, then by that epoch: a sweep skips together
        # every status read under a holder's current epoch (_candidates).
        self._known: dict[str, tuple[Status, int]] = {}
        self._held: dict[str, dict[int, set[str]]] = {}
        # Each holder's trusted epoch as the sweep last asked (Liveness.trusted_epoch), kept
        # while Liveness says it holds (trusted_until, changed_trust), with a heap of those
        # times; and the holders that may have statuses read under another epoch than that.
        # A sweep then costs the holders whose trust changed, not every holder (_distrusted).
        self._trust: dict[str, tuple[int | None, datetime]] = {}
        self._trust_ends: list[tuple[datetime, str]] = []
        self._ask_again: set[str] = set()  # holders whose trust holds for one sweep only
        self._mixed: set[str] = set()
        # Kept from the folders' logs (Folder.since), so that a look costs what changed since
        # the last, not the live history: the listed requests without a listed status
        # (unclaimed), those with one (open); and of the open ones not in _known, those this
        # agent read (their status or the request: unsettled) and the others (unread).
        self._followed = [0, 0]  # positions in the logs of statuses/ and requests/
        self._unclaimed: set[str] = set()
        # The unclaimed requests as read, by id, with what orders them (oldest first): a look
        # goes through every one (to expire), so it must not read or rebuild each every look.
        # An id whose listing moved is dropped (_place) and read again from the index.
        self._queue: dict[str, tuple[datetime, str, Request | None]] = {}
        self._open: set[str] = set()
        self._unsettled: set[str] = set()
        self._unread: set[str] = set()
        self._last_sweep: datetime | None = None
        self._swept = False  # a sweep of this process looked at every status once
        self.backlog = 0  # unclaimed requests for this agent the last look left for later
        self.cancels = cancels  # operators' cancels: never claim those
        # Whether the agent may take a request now: its record landed recently enough that no
        # one can judge it lost before its next one (written first if due; Agent.keep_alive).
        self.ready = ready
        self.quiet = QuietLook(mailbox)  # the change signal, and when this agent last listed

    def look_for_work(self, now: datetime, *, may_skip: bool = False) -> None:
        """Sweep the requests under way (when due), then claim or expire unclaimed ones.

        ``may_skip`` (a poll that nothing announced work to): skip it all when this agent knows
        of no open request and the change signal did not move (:meth:`_quiet`)."""
        if may_skip and self._quiet(now):
            return
        if may_skip and self._swept and self._full():
            return
        self._listings()
        self._follow_listings()
        # Listed: what the signal said moved is in the listing (a store error before here
        # leaves it moved, and the next poll lists again).
        self.quiet.listed(now.timestamp())
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
            self._sweep(busy, now)
        self._claim_unclaimed(now)

    def _quiet(self, now: datetime) -> bool:
        """Nothing to look at: no open request known, the signal as last seen, and the last
        full listing younger than FULL_LOOK_SECONDS (or the clock went back)."""
        if self.holdings.work or self._unclaimed or self._open_known():
            return False
        return self.quiet.may_skip(now.timestamp())

    def _full(self) -> bool:
        """Whether this agent's claim policy takes nothing now: then its poll lists nothing,
        for a look could claim, take over or pick up nothing (each asks the policy first; its
        own claims whose answers were lost are held again at its next look with room).

        The change signal, one read, says whether work was announced since its last listing:
        then the first worker that frees looks at once (``backlog``), as it would had the
        poll listed the new request. Takeover stays within its bound: a poll without room is
        not one that could move a lost agent's request (docs/takeover.md)."""
        if self.components.claim.may_claim(self.holdings.load()):
            return False
        if self.quiet.signal.moved():
            self.backlog = max(self.backlog, 1)
        return True

    def _open_known(self) -> bool:
        """Whether a request this agent listed is not final, as far as it knows: a status whose
        listed version moved since it was read is read again (one read each: a final status
        never changes again). A malformed status counts as not open (reported where read)."""
        statuses = self.index.statuses
        unknown = sorted(self._open - self.holdings.final)
        if not self.index.versioned:
            return bool(unknown)  # a listing without etags: only a final status is known
        for request_id in unknown:  # first without a read: one read as it was is open still
            known = statuses.known(request_id)
            value = known.value if known is not None else None
            if value is not None and not value.state.final and not statuses.changed(request_id):
                return True
        for request_id in unknown:
            entry = statuses.get(request_id)
            status = entry.value
            if status is None:
                continue
            if not status.state.final:
                return True
            self.holdings.final.add(request_id)
            self._forget(request_id)
        return False

    def _listings(self) -> None:
        """List ``status/``, then ``requests/``: in this order. Retention deletes a request
        before its status, so a request listed after its status was not had no status then
        (docs/retention.md). The other order could list a request, then miss the status a move
        deleted meanwhile, and claim a request that had ended."""
        self.index.statuses.refresh()
        self.index.requests.refresh()

    def _follow_listings(self) -> None:
        """Bring the look's sets up to the listings just made, from what the folders logged
        since the last look (ids listed anew, replaced or gone, and ids read)."""
        changed: set[str] = set()
        folders: list[Folder[Any]] = [self.index.statuses, self.index.requests]
        for n, folder in enumerate(folders):
            ids, self._followed[n] = folder.since(self._followed[n])
            if ids is None:  # the log forgot some: look at every id again
                changed |= self.index.statuses.listed.keys() | self.index.requests.listed.keys()
                changed |= self._open | self._unclaimed | self._known.keys()
                self.holdings.final &= self.index.statuses.listed.keys()
            else:
                changed.update(ids)
        for request_id in changed:
            self._place(request_id)

    def _place(self, request_id: str) -> None:
        """Put ``request_id`` in the sets its listings say. A request no longer listed
        (archived or deleted by retention) is forgotten: what this agent remembers follows the
        mailbox, not every request it ever saw (the index forgets its files on its own)."""
        # A hot path: each poll of every agent of a fleet takes the fleet's writes here.
        request = request_id in self.index.requests.listed
        unclaimed, opened = self._unclaimed, self._open
        self._queue.pop(request_id, None)
        if request_id not in self.index.statuses.listed:
            self.holdings.final.discard(request_id)
            self._forget(request_id)
            opened.discard(request_id)
            self._unsettled.discard(request_id)
            self._unread.discard(request_id)
            if request:
                unclaimed.add(request_id)
            else:
                unclaimed.discard(request_id)
            return
        unclaimed.discard(request_id)
        if request:
            opened.add(request_id)
        else:
            opened.discard(request_id)
        self._settle(request_id)

    def _settle(self, request_id: str) -> None:
        """File an open request not in _known as unsettled (read by this agent) or unread."""
        self._unsettled.discard(request_id)
        self._unread.discard(request_id)
        if request_id not in self._open or request_id in self._known:
            return
        if (
            self.index.statuses.known(request_id) is not None
            or self.index.requests.known(request_id) is not None
        ):
            self._unsettled.add(request_id)
        else:
            self._unread.add(request_id)

    def _know(self, request_id: str, status: Status, epoch: int) -> None:
        self._forget(request_id)
        assert status.agent is not None
        self._known[request_id] = (status, epoch)
        self._held.setdefault(status.agent, {}).setdefault(epoch, set()).add(request_id)
        trust = self._trust.get(status.agent)
        if trust is None or trust[0] != epoch:
            self._mixed.add(status.agent)
        self._settle(request_id)

    def _forget(self, request_id: str) -> None:
        known = self._known.pop(request_id, None)
        if known is None:
            return
        status, epoch = known
        assert status.agent is not None
        by_epoch = self._held[status.agent]
        by_epoch[epoch].discard(request_id)
        if not by_epoch[epoch]:
            del by_epoch[epoch]
            if not by_epoch:
                del self._held[status.agent]
        self._settle(request_id)

    def _candidates(self, busy: set[str], now: datetime) -> list[str]:
        """The statuses a sweep looks at, in id order: every open one not final nor busy, less
        those :meth:`_unchanged` would pass over unread, found without asking each of them.
        Judged by the listing, those are the statuses held by a live holder under the epoch
        they were read at (by holder: what changed), and, once every status was looked at and
        no agent is lost or stopping, those this agent never read."""
        final = self.holdings.final
        if not self.liveness.by_listing:
            return sorted((self._open - final) - busy)
        look = set(self._unsettled)
        # First: asking for trust may judge a holder lost, which makes it a suspect.
        look |= self._distrusted(self.liveness.store_now(now))
        if not (self._swept and not self.liveness.suspects):
            look |= self._unread  # an agent lost or stopping may hold one
        look.update(self.holdings.work.keys() & self._open)
        ended = [i for i in look if i in final]
        for request_id in ended:  # a final status never changes: not looked at again
            self._unsettled.discard(request_id)
            self._unread.discard(request_id)
        return sorted(i for i in look if i in self._open and i not in final and i not in busy)

    def _distrusted(self, at: datetime) -> set[str]:
        """The statuses of other holders read under an epoch other than the holder's trusted
        one at ``at`` (the store's time; none trusted for a holder lost or without a record)."""
        self._refresh_trust(at)
        look: set[str] = set()
        for holder in list(self._mixed):
            trusted = self._trust[holder][0] if holder in self._held else None
            distrusted = [
                ids for epoch, ids in self._held.get(holder, {}).items() if epoch != trusted
            ]
            look.update(*distrusted)
            if not distrusted:
                self._mixed.discard(holder)
        return look

    def _refresh_trust(self, at: datetime) -> None:
        """Ask Liveness again for the trusted epoch of the holders whose trust changed or ran
        out since it was last asked (Liveness.changed_trust, trusted_until), and only those."""
        trust, ends = self._trust, self._trust_ends
        for holder in self.liveness.changed_trust() | self._ask_again:
            trust.pop(holder, None)
        self._ask_again.clear()
        while ends and ends[0][0] < at:
            until, holder = heapq.heappop(ends)
            kept = trust.get(holder)
            if kept is not None and kept[1] == until:
                del trust[holder]
        take_over = self.config.take_over
        for holder in self._held:  # in this order: a judgement may read a record
            if holder in trust:
                continue
            trusted = self.liveness.trusted_epoch(holder, at, take_over)
            self._mixed.add(holder)
            ends_at = self.liveness.trusted_until(holder, take_over)
            trust[holder] = (trusted, ends_at or at)
            if ends_at is None:
                self._ask_again.add(holder)
            elif ends_at != LATEST:
                heapq.heappush(ends, (ends_at, holder))

    def _sweep(self, busy: set[str], now: datetime) -> None:
        """Statuses no running table of ours covers: resume own, pick up handed back, take over."""
        self.liveness.new_sweep()
        if self.config.take_over:
            self.liveness.judge_all(now)
        else:
            self.liveness.look()  # who starts stopping (and hands requests back)
        request_ids = self._candidates(busy, now)
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
            if not self.ready():
                return
            self.status_changes.take_over(found, request, now, reason, lost=lost)

    def _look_at(self, request_id: str, now: datetime) -> tuple[Versioned[Status], str] | None:
        """One status of the sweep: (the status, why this agent may take it), or None."""
        if self._unchanged(request_id, now):
            return None
        self.ready()  # a long sweep keeps the record written
        self._forget(request_id)
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
        self._know(request_id, status, self.liveness.epoch(status.agent))

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

        One held through a pause may have been taken over meanwhile: the pause outlasted
        ``stale_after + grace`` and another agent's attempt now owns the status.
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

    def _claim_unclaimed(self, now: datetime) -> None:
        """Oldest first: expire those past their deadline, claim others as the policy allows."""
        # Read in id order (a seeded simulation's reads come in the same order every run),
        # before the backlog is counted anew: a read that fails leaves the last look's.
        queue = sorted(map(self._queued, sorted(self._unclaimed)))
        self.backlog = 0
        full = False  # the policy said no: nothing more is claimed in this look
        for _, _, request in queue:
            if request is None:
                continue
            if self.cancels.end_unclaimed(request.id, now):
                continue
            if request.deadline is not None and now > request.deadline:
                self.status_changes.expire(request, now)
                continue
            if not self._may_hold(request):
                continue
            if full or not self.components.claim.may_claim(self.holdings.load()):
                full = True
                self.backlog += 1  # a worker that frees may take it at once (Agent.react)
                continue  # keep going: later requests may still need expiring
            # With a worker free the request starts in this poll: created running at once.
            free = self.holdings.load().running < self.config.concurrency
            if not self.ready():
                return
            self.status_changes.claim(request, now, start=free)

    def _queued(self, request_id: str) -> tuple[datetime, str, Request | None]:
        """An unclaimed request with its place in the queue (created, id), read once while its
        listing stays as it was; one unreadable or absent sorts first and is passed over."""
        queued = self._queue.get(request_id)
        if queued is None:
            request = self._request(request_id)
            created = request.created_at if request is not None else EARLIEST
            queued = self._queue[request_id] = (created, request_id, request)
        return queued

    def _may_hold(self, request: Request) -> bool:
        """A request with an affinity (an unshared schedule's) is for that agent only."""
        return request.affinity is None or request.affinity == self.agent

    def _request(self, request_id: str) -> Request | None:
        """The request (read once: requests never change); None if absent or unreadable."""
        return self.index.requests.get(request_id).value
