"""Every extension protocol of fdcore, with the value types that cross it.

This is the one module a plugin author reads: the storage backend, claim policy, slot function,
takeover policy, lease provider, notifier, table runner, host admission and command protocols,
each with the data it is given and returns (and the optional protocols a storage may add).
Implementations are registered through the hooks of :mod:`fdcore.plugins.hookspecs` and chosen
by name in ``agent.toml``. The errors a protocol's methods raise live in :mod:`fdcore.errors`.

Layer: imports only :mod:`fdcore.errors` and the mailbox contract (:mod:`fdcore.contract`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from fdcore.contract.codec import MAX_FILE_BYTES
from fdcore.contract.models import AgentRecord, Lease
from fdcore.errors import (
    EnvironmentNotFound,
    InvalidKey,
    NotFound,
    PreconditionFailed,
    StorageError,
)
from fdcore.settings.table_process import DEFAULT_LEASES, table_environ

__all__ = [
    "ENVIRONMENT_MARKER",
    "MARKER_CONTENT",
    "MAX_KEY_LENGTH",
    "AgentLoad",
    "Blob",
    "BoundedRead",
    "ChangeCheck",
    "ClaimPolicy",
    "Command",
    "FinishReleasesLease",
    "HeldLease",
    "HostAdmission",
    "HostGate",
    "HostSlots",
    "LeaseProvider",
    "LeaseWaits",
    "Listed",
    "ListedChanges",
    "ListingChanges",
    "MarkedStorage",
    "Notification",
    "Notifier",
    "NotifierChannel",
    "Slot",
    "SlotFunction",
    "Storage",
    "StorageBackend",
    "StoreClock",
    "TableJob",
    "TableLeases",
    "TableResult",
    "TableRun",
    "TableRunner",
    "TakeoverPolicy",
    "Timetable",
    "VersionedListing",
    "WaitableRun",
    "WatchableStorage",
    "check_precondition",
    "open_marked",
    "prove_writable",
    "read_mailbox_file",
    "validate_key",
    "validate_prefix",
]

# -- storage ----------------------------------------------------------------------------------
#
# A mailbox needs only five operations from a store. Two of them are conditional writes, and the
# whole product rests on them:
#
# * ``Storage.create`` is create-if-absent (``If-None-Match: *``): of many writers racing on one
#   key exactly one succeeds, the others get AlreadyExists.
# * ``Storage.replace`` is replace-if-unchanged (``If-Match: <etag>``): of many writers holding
#   the same etag exactly one succeeds, the others get PreconditionFailed.
#
# Keys are ``/``-separated relative paths such as ``requests/r-1.json``, compared exactly, code
# point by code point: keys that differ only by case or Unicode form (NFC and NFD) are different
# keys, as request ids ``R1`` and ``r1`` are different requests. A store that folds case or
# normalises names cannot hold a mailbox (the conformance probe ``distinct-keys``). A reader
# never sees a partially written value: a value is either absent or complete, and once a write
# returned every read and listing from any handle sees it.

MAX_KEY_LENGTH = 1024


@attrs.frozen
class Blob:
    """What a read returns: the complete bytes and the etag naming this version."""

    data: bytes
    etag: str


@runtime_checkable
class Storage(Protocol):
    """One environment's storage, as a backend opens it for a URL."""

    url: str
    # A store whose listing comes in pages may also set ``list_page_size`` (an int): the most
    # keys one request of its listing returns. The conformance probe list-paging then lists
    # twice that plus one keys.

    def read(self, key: str) -> Blob | None:
        """Return the object's bytes and etag, or ``None`` when it does not exist."""

    def create(self, key: str, data: bytes) -> str:
        """Create ``key`` only if absent; return its etag. Raise :class:`AlreadyExists`."""

    def replace(self, key: str, data: bytes, etag: str) -> str:
        """Replace ``key`` only if its etag is ``etag``; return the new etag.

        Raise :class:`PreconditionFailed` on a different etag, :class:`NotFound` if absent.
        """

    def delete(self, key: str, etag: str | None = None) -> None:
        """Delete ``key`` (only if its etag is ``etag`` when given).

        Raise :class:`NotFound` if absent, :class:`PreconditionFailed` on a different etag.
        """

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key that starts with ``prefix``, in code point order, across every page
        of the store's listing. The prefix is a plain string: no folders, case folding or
        wildcards (``_``, ``%``, ``*`` and ``[`` are characters like any other)."""

    def close(self) -> None:
        """Release connections and handles. The store is not used afterwards."""


@runtime_checkable
class WatchableStorage(Protocol):
    """A storage that can tell when keys appear: agents then notice new requests at once.

    Optional: without it an idle agent notices a new request at its next poll.
    """

    def watch(self, prefix: str, changed: Callable[[], None], stop: threading.Event) -> None:
        """Call ``changed()`` soon after a key under ``prefix`` is created, replaced or deleted,
        until ``stop`` is set (checked at least every second). Blocks: the runtime gives it a
        thread. A spurious call is harmless (the agent looks once and finds nothing).

        A store that calls ``changed()`` once as soon as its watch is armed tells its callers
        when a change can no longer be missed: until that first call (or for a few seconds, from
        a store that never makes it) a waiter looks every few tens of milliseconds."""


@runtime_checkable
class StoreClock(Protocol):
    """Optional for a :class:`Storage`: the store's own time, as its last write reported it.

    An agent compares it with its clock after each write of its status record and refuses to
    take over other agents' requests while the two differ by more than ``grace_seconds``. A
    backend that cannot tell does not implement it; its agents measure no skew.
    """

    # A store may also set ``clock_resolution`` (seconds, a float): how coarse its stamps are
    # (1.0 for HTTP ``Last-Modified``); the agent widens its measurement error by that much.

    def last_write_time(self) -> datetime | None:
        """When the store wrote the last object this instance created or replaced, by the
        store's clock (a file's mtime, an HTTP ``Last-Modified``); None before any write."""


@runtime_checkable
class BoundedRead(Protocol):
    """Optional for a :class:`Storage`: read a mailbox file only if it is one.

    Mailbox readers use it when the store has it (:func:`read_mailbox_file`): a key that holds
    a folder, a FIFO, a device, a symbolic link or more than ``max_bytes`` bytes raises
    :class:`fdcore.errors.UnreadableFile` without being read, so one stray file can neither
    block nor exhaust a reader. A plain :meth:`Storage.read` returns any size.
    """

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        """Like :meth:`Storage.read`, within the bound; raise UnreadableFile otherwise."""


@runtime_checkable
class ChangeCheck(Protocol):
    """Optional for a :class:`Storage`: tell, without reading it, that a key is unchanged.

    Mailbox readers use it to leave a file they found malformed unread until it changes (a
    local folder answers from the file's inode and modification time, one ``stat``).
    """

    def unchanged(self, key: str, etag: str) -> bool:
        """True if ``key`` still holds the value read with ``etag``; False if it changed, is
        gone, or the store cannot tell cheaply."""


@attrs.frozen
class Listed:
    """One key of a :class:`VersionedListing`: its etag and when the store last wrote it."""

    key: str
    #: Equal to the etag a read of this version returns (:attr:`Blob.etag`).
    etag: str
    #: The store's time of the write that made this version (aware, UTC), by the store's clock.
    modified: datetime


@runtime_checkable
class VersionedListing(Protocol):
    """Optional for a :class:`Storage`: a listing that says what changed.

    With it a mailbox reader lists a folder once and reads only the keys whose etag differs
    from the version it read before, and an agent judges another agent's liveness from the
    store's last-modified time of its record, without reading it and without trusting the
    holder's clock. Without it every look reads every file it needs.
    """

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        """Like :meth:`Storage.list`, each key with its current etag and last-modified time,
        in the same order and from the same single pass over the store's listing."""


@attrs.frozen
class ListedChanges:
    """What :meth:`ListingChanges.list_changes` answers: a whole listing, or what changed."""

    #: Hand it back to the next call for the same prefix (opaque to the caller).
    cursor: object
    #: True: ``listed`` is the whole listing (a first call, or a cursor the store no longer
    #: follows); False: ``listed`` and ``removed`` are what changed since the cursor.
    complete: bool
    #: Complete: every key, as :meth:`VersionedListing.list_versions` gives them. Otherwise each
    #: key created or replaced since the cursor and still there, at its current version, in
    #: key order.
    listed: list[Listed]
    #: Not complete: the keys deleted since the cursor and not there now (some may never have
    #: been listed to the caller: created and deleted in between). Empty when complete.
    removed: list[str]


@runtime_checkable
class ListingChanges(Protocol):
    """Optional for a :class:`VersionedListing`: a listing diffed by the store against a cursor.

    A reader that lists a folder over and over (an agent's poll) then pays for what changed
    since its last listing, not for every live key. Offered where the store can tell cheaply
    (the memory store and the simulator's keep a log of their writes, the local folder is told
    by inotify); elsewhere a reader keeps the full listing (:meth:`VersionedListing.list_versions`).
    """

    def list_changes(self, prefix: str, cursor: object | None = None) -> ListedChanges:
        """One list operation: with ``cursor`` None (or one the store forgot), the whole
        listing of ``prefix`` (``complete``); otherwise what changed under ``prefix`` since the
        call that gave ``cursor``."""


def read_mailbox_file(storage: Storage, key: str, max_bytes: int = MAX_FILE_BYTES) -> Blob | None:
    """Read ``key`` as a mailbox file: bounded where the store can bound it (else the codec's
    size check rejects an oversized value after reading it)."""
    # getattr, not isinstance: a runtime-checkable protocol's isinstance walks the protocol's
    # members on every call, and every mailbox read comes here.
    read_bounded = getattr(storage, "read_bounded", None)
    if read_bounded is not None:
        bounded: Blob | None = read_bounded(key, max_bytes)
        return bounded
    return storage.read(key)


def check_precondition(key: str, current: Blob | None, etag: str | None) -> Blob:
    """What replace and delete check first, the same in every backend that compares etags."""
    if current is None:
        raise NotFound(key, "does not exist")
    if etag is not None and current.etag != etag:
        raise PreconditionFailed(key, f"etag {etag} is stale (now {current.etag})")
    return current


def validate_key(key: str) -> str:
    """Return ``key`` if it is a legal relative path for every backend, else raise InvalidKey.

    Segments are non-empty, never ``.``/``..``, never start with ``.`` (backends keep their own
    scratch files under dot names), and hold no control characters or backslashes.
    """
    if isinstance(key, str):
        return _valid_key(key)  # a store checks the same few keys over and over
    raise InvalidKey(None, f"invalid key {key!r}: must be a non-empty string")


@functools.lru_cache(maxsize=4096)
def _valid_key(key: str) -> str:
    """:func:`validate_key` of a string; only legal keys are remembered (a raise is not)."""
    if not key:
        raise InvalidKey(None, f"invalid key {key!r}: must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(None, f"invalid key {key[:40]!r}...: longer than {MAX_KEY_LENGTH}")
    for segment in key.split("/"):
        if not segment or segment.startswith("."):
            raise InvalidKey(None, f"invalid key {key!r}: empty or dot-prefixed path segment")
        if any(ord(ch) < 32 or ch in "\\\x7f" for ch in segment):
            raise InvalidKey(None, f"invalid key {key!r}: control character or backslash")
    return key


#: What makes a folder of a store without folders (S3, blob storage) an environment: the object
#: ``fdcore init`` writes (a local folder's mark is its ``.fdcore/`` folder). A dot name is never
#: a mailbox key, so no mailbox write can make or remove it, and listings leave it out.
ENVIRONMENT_MARKER = ".fdcore/environment.json"
MARKER_CONTENT = b'{"fdcore": "environment"}\n'


def prove_writable(storage: Storage) -> None:
    """Prove the caller may list, create, replace and delete in ``storage``: one probe key,
    written, replaced and removed again (four requests and a listing). A store that refuses
    raises its one-line error, which names what is missing (credentials, bucket, permission).
    A backend runs it before marking a new environment, so no mark lands where work cannot."""
    probe = f"fdcore-init-{uuid.uuid4().hex[:16]}.json"
    list(storage.list(probe))
    etag = storage.create(probe, b"{}")
    try:
        storage.replace(probe, b"{}", etag)
    except StorageError:
        with contextlib.suppress(StorageError):  # the refusal above is the news, not this
            storage.delete(probe)
        raise
    storage.delete(probe)


class MarkedStorage(Storage, Protocol):
    """A store without folders (S3, blob storage), whose environment is a folder holding
    :data:`ENVIRONMENT_MARKER`: it says whether the marker is there and writes it."""

    def is_environment(self) -> bool:
        """Whether the marker is there (one request; its refusal names credentials, endpoint,
        bucket or container)."""

    def mark_environment(self) -> None:
        """Write the marker if it is missing (create-if-absent: a racing ``init`` is fine)."""


def open_marked(storage: MarkedStorage, shown_url: str, *, create: bool) -> None:
    """What a backend of a store without folders does on ``open``: without ``create``, one
    request checks the marker is there (a typo'd folder is EnvironmentNotFound, never an empty
    environment); with it, :func:`prove_writable`, then the marker written if missing. The
    storage is closed if any of it fails. ``shown_url`` is the URL as errors may show it."""
    try:
        marked = storage.is_environment()  # credentials, endpoint and bucket first
        if create:
            prove_writable(storage)
            if not marked:
                storage.mark_environment()
        elif not marked:
            raise EnvironmentNotFound(shown_url, f"no {ENVIRONMENT_MARKER} in the folder")
    except BaseException:
        storage.close()
        raise


def validate_prefix(prefix: str) -> str:
    """A list prefix is a key prefix: empty, or a key possibly ending in ``/``."""
    if prefix:
        validate_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


@runtime_checkable
class StorageBackend(Protocol):
    """A storage plugin's implementation, as returned by ``fdcore_storage_backends``."""

    #: The name operators see in ``fdcore plugins`` and may put in ``[agent] storage``.
    name: str

    def accepts(self, url: str) -> bool:
        """Whether this backend serves environment URLs like ``url`` (no I/O)."""

    def open(self, url: str, options: dict[str, str], *, create: bool = True) -> Storage:
        """Open the environment at ``url``. ``options`` come from ``[storage]`` in agent.toml.

        ``create=True`` (agents, ``fdcore submit``) may create a missing environment.
        ``create=False`` (the read-only commands, ``fdcore doctor``) must create and write
        nothing: a missing environment raises :class:`fdcore.errors.EnvironmentNotFound`. A
        backend whose open creates nothing either way may ignore the flag; one whose ``open``
        has no ``create`` parameter (written before it) is called without it.

        Raise :class:`fdcore.errors.ConfigError` for a URL or option it cannot use, and
        :class:`fdcore.errors.EnvironmentUnusable` for a place that cannot hold an environment
        (a file where the folder belongs, no permission): one line naming what to fix.
        """


# -- claim policy -----------------------------------------------------------------------------


@attrs.frozen
class AgentLoad:
    """What a claim policy sees of the agent asking."""

    concurrency: int  # workers
    running: int  # requests started on a worker
    waiting: int  # requests claimed but not yet started
    # the host's free execution slots (``[agent] host``), shared with the host's other agents;
    # None when the agent has no host admission
    host_free: int | None = None


@runtime_checkable
class ClaimPolicy(Protocol):
    """Decides, before each claim and each takeover, whether the agent takes one more request."""

    name: str

    def may_claim(self, load: AgentLoad) -> bool:
        """True if the agent may claim (or take over) one more request now."""


# -- slot function ----------------------------------------------------------------------------


@attrs.frozen
class Slot:
    """One due time of a schedule."""

    id: str  # becomes part of a file name: a valid id
    due_at: datetime  # UTC
    deadline: datetime  # UTC; after it the slot's request is not created, an unclaimed one expires


@runtime_checkable
class Timetable(Protocol):
    """A parsed schedule timing (``every = "15m"``, ``daily = "02:00"``...)."""

    def latest_due(self, now: datetime) -> Slot | None:
        """The latest slot with ``due_at <= now``, or None if there is none yet."""

    def next_due(self, now: datetime) -> Slot:
        """The first slot with ``due_at > now``."""

    def describe(self) -> str:
        """A canonical text of the timing, the same on every agent that parsed the same spec."""


@runtime_checkable
class SlotFunction(Protocol):
    """Parses one kind of timing. Its name is the schedule key it answers (``every``, ``cron``)."""

    name: str

    def parse(self, spec: str, options: dict[str, Any]) -> Timetable:
        """Parse ``spec``; ``options`` are the schedule's other keys (``timezone``, ``deadline``).

        Raise ValueError with a one-line message for a spec it cannot use.
        """


# -- takeover policy --------------------------------------------------------------------------


@runtime_checkable
class TakeoverPolicy(Protocol):
    """Judges from an agent's status record whether it is lost."""

    name: str

    def is_lost(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> bool:
        """True if the agent that wrote ``record`` is lost at ``now``.

        ``record`` is None when the agent has no readable record: such an agent is never lost
        under the default policy, since its absence proves nothing.

        Where the store's listing carries last-modified times and the store reports its time
        (:class:`VersionedListing`, :class:`StoreClock`), the agent judges by the listing: then
        ``record.updated_at`` is the store's last-modified time of the record's latest version
        and ``now`` the store's time (the asking agent's clock less its measured skew), so the
        holder's clock plays no part; the record's other fields are as last read (a record
        that changed is read before an agent is judged lost). Elsewhere both are as written and
        by the asking agent's clock. A policy compares the two either way.

        A policy may also offer ``lost_after(record, grace_seconds) -> datetime``: the time
        after which ``is_lost`` holds on ``record``, never earlier for a later ``updated_at``.
        Judged by the listing, an agent then judges each holder once per such window instead of
        at every sweep (docs/plugins.md). Optional: not part of the protocol's check.
        """


# -- lease provider ---------------------------------------------------------------------------


@attrs.frozen
class HeldLease:
    """A lease the caller holds, with the provider's opaque version token for renewal."""

    lease: Lease
    token: str


@runtime_checkable
class TableLeases(Protocol):
    """An environment's table leases, opened by a :class:`LeaseProvider`."""

    def acquire(
        self,
        table: str,
        holder: str,
        request: str,
        attempt: int,
        ttl: float,
        now: datetime,
        grace: float = 0.0,
    ) -> HeldLease | None:
        """Take ``table``'s lease if it is free, released or expired; None if another holds it.

        Another holder's lease counts as expired only ``grace`` seconds after its
        ``expires_at``: the holder wrote that time by its own clock, which may run behind ours.
        ``grace`` is ``math.inf`` while the caller's clock is too far off the store's to judge
        (:mod:`fdcore.agent.skew`): then only a lease its holder gave up may be taken.
        Every acquisition raises the generation by one, whoever held it before.
        """

    def renew(self, held: HeldLease, ttl: float, now: datetime) -> HeldLease:
        """Extend the lease to ``now + ttl``; raise :class:`LeaseLost` if it is no longer ours."""

    def release(self, held: HeldLease, now: datetime) -> None:
        """Give the lease up (keeping its generation); a lease already lost is left alone."""

    def current(self, table: str) -> Lease | None:
        """The table's lease as stored, or None if it never had one."""


@runtime_checkable
class FinishReleasesLease(Protocol):
    """Table leases that count a lease as released once its request's status is final in the
    holder's own attempt (its table ended and was recorded). Optional: with it the agent does
    not write the release of a request's last table, its finish already freed it."""

    finish_releases: bool


@runtime_checkable
class LeaseWaits(Protocol):
    """Optional for :class:`TableLeases`: when the lease that kept the last ``acquire`` of a
    table from landing runs out (its ``expires_at`` plus the grace that acquire was given), so
    a waiting agent wakes then instead of at its next poll. None when that is not known (the
    acquire lost a race, or its grace was infinite)."""

    def free_at(self, table: str) -> datetime | None: ...


@runtime_checkable
class LeaseProvider(Protocol):
    """A kind of lease store (``mailbox``: lease files next to the requests)."""

    name: str

    def open(self, storage: Storage, options: dict[str, Any]) -> TableLeases:
        """Table leases for the environment in ``storage``. ``options`` carry
        ``max_file_bytes``, the operator's bound of a mailbox file: a provider that keeps its
        leases in the mailbox reads and writes nothing bigger."""


# -- notifier ---------------------------------------------------------------------------------


@attrs.frozen
class Notification:
    """What a notifier sends: one incident, opened or still open, to the route named ``route``;
    or, with ``digest`` set, several in one post (the outer fields then describe the bundle)."""

    environment: str
    incident_id: str
    title: str
    severity: str
    text: str
    route: str
    kind: str | None = None  # agent_offline, request_failed, slot_missed
    subject: str | None = None  # the agent, request or schedule slot it is about
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    count: int = 1  # occurrences: a new failure, slot missed or lost spell each (not sightings)
    ack_command: str | None = None  # the exact command that acknowledges it
    escalation: bool = False  # sent because it stayed open and unacknowledged
    digest: tuple[Notification, ...] = ()  # a digest: the incidents this one post lists


@runtime_checkable
class NotifierChannel(Protocol):
    """One route's channel, opened at start-up and used for every notification to the route."""

    def send(self, notification: Notification) -> None:
        """Deliver one notification; raise on a failure that retrying here will not mend.

        Bound the time it takes (a network call needs a timeout): the caller waits for it.
        """


@runtime_checkable
class Notifier(Protocol):
    """A kind of notification channel (``log``, ``teams``)."""

    name: str

    def open(self, route: str, options: dict[str, Any]) -> NotifierChannel:
        """A channel for the route ``route``, configured with the route's other keys in agent.toml.

        No I/O: this runs at start-up. Raise ValueError with a one-line message naming the
        option for options it cannot use.
        """


# -- table runner -----------------------------------------------------------------------------


@attrs.frozen
class TableJob:
    """One table of one request, as handed to a runner."""

    request: str
    table: str
    attempt: int
    fencing_token: int  # the table lease's generation
    agent: str
    environment: str  # the environment URL
    leases: str = DEFAULT_LEASES  # the lease provider's name: a fenced write checks the token there
    # the operator's bound of a mailbox file (``[agent] max_file_bytes``): a fenced write reads
    # and writes within it
    max_file_bytes: int = MAX_FILE_BYTES
    # open descriptors the table process inherits: a host admission's held lane (docs/host.md),
    # so the lane stays held while the process runs (it never outlives its agent)
    inherit: tuple[int, ...] = ()
    run_as: str | None = None  # ``[runner] run_as``: the identity it runs as (FDCORE_RUN_AS)
    # the agent's ``[storage]``: a table process opens the environment as its agent does
    storage_backend: str | None = None
    storage_options: Mapping[str, str] = attrs.field(factory=dict, hash=False)

    def environ(self) -> dict[str, str]:
        """The variables a command runner puts in the table process's environment
        (:mod:`fdcore.settings.table_process` declares them)."""
        return table_environ(self)


@attrs.frozen
class TableResult:
    succeeded: bool
    message: str = ""
    # Details for the run log, left out of equality (two results saying the same are equal):
    # a table process's exit code, and the last lines of its output (stderr) and, for a failed
    # table, of its stdout (at most 4 KiB of each kept).
    exit_code: int | None = attrs.field(default=None, eq=False)
    output: str = attrs.field(default="", eq=False)
    stdout: str = attrs.field(default="", eq=False)


@runtime_checkable
class TableRun(Protocol):
    """A table run under way."""

    def poll(self) -> TableResult | None:
        """The result once the run has ended, None while it runs. Never blocks."""

    def cancel(self) -> None:
        """Stop the run (the agent lost the request or is shutting down past its grace)."""


@runtime_checkable
class WaitableRun(Protocol):
    """A table run that can also be waited on: the runtime wakes its agent when it ends.

    Optional: a run without ``wait`` is noticed by a short tick while it runs instead.
    """

    def poll(self) -> TableResult | None: ...

    def cancel(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended (True) or ``timeout`` passed (False). Never takes its
        result: :meth:`poll` still returns it, from any thread."""


@runtime_checkable
class TableRunner(Protocol):
    """Starts table runs. Built in: ``command`` (a subprocess) and ``python`` (a callable)."""

    name: str

    def start(self, job: TableJob, options: dict[str, Any]) -> TableRun:
        """Start running ``job``; ``options`` come from ``[runner]`` in agent.toml."""


# -- host admission ---------------------------------------------------------------------------
#
# Below the mailbox: how the agent processes of one machine share it. The mailbox decides which
# agent runs a table; a host admission decides when this machine has room to run it.


@attrs.frozen
class HostSlots:
    """A host's execution slots, shared by all its agents: how many, and how many are busy."""

    configured: int
    busy: int

    @property
    def free(self) -> int:
        """How many more tables the host admits now; a host is free while one slot is."""
        return max(0, self.configured - self.busy)


@runtime_checkable
class HostGate(Protocol):
    """One host's admission, opened by a :class:`HostAdmission` for ``[agent] host``."""

    def slots(self) -> HostSlots | None:
        """The host's slots now, or None for an admission that does not count them.

        Bounded and quick: the claim policy asks before every claim. Never raises: a host that
        cannot be read has no free slot (fail closed).
        """

    def admit(self, job: TableJob, start: Callable[[TableJob], TableRun]) -> TableRun:
        """A run of ``job`` that calls ``start`` once the host admits it and gives the host's
        place back when the run ends or is cancelled.

        Never blocks: while the host is full the returned run's ``poll`` returns None (still
        waiting). A host that refuses for good (its folder is unusable) ends the run failed.
        """


@runtime_checkable
class HostAdmission(Protocol):
    """A kind of host admission (``slots``: durable execution slots, fdcore-hostslots)."""

    name: str

    def open(self, host: str, options: dict[str, Any]) -> HostGate:
        """The gate of the host folder ``host`` (``[agent] host``) for one agent.

        ``options`` carry ``agent`` (the agent's name) and ``lease_seconds``. Raise
        :class:`fdcore.errors.FdcoreError` with one line naming what to fix for a host folder
        that cannot be used.
        """


# -- command ----------------------------------------------------------------------------------


@runtime_checkable
class Command(Protocol):
    """A subcommand a plugin adds to the ``fdcore`` command line: ``fdcore <name> ...``."""

    name: str  # what follows ``fdcore``; must not be one of fdcore's own commands
    help: str  # one line, shown in ``fdcore --help``

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's options and arguments to ``parser``, its own sub-parser."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the command's work; return the exit code (0 for success).

        Raise :class:`fdcore.errors.FdcoreError` (a ConfigError for bad input) for an error the
        user can fix: ``fdcore`` prints it as one line and exits 2.
        """
