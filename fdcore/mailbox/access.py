"""Typed access to one environment's mailbox: where each file lives and how it is read.

Layout under the environment root (documented in docs/contracts.md)::

    requests/<id>.json            Request
    status/<id>.json              Status (created by the claim)
    agents/<name>.json            AgentRecord
    leases/<table>.json           Lease
    runs/<id>/<attempt>-<table>.json  RunRecord
    incidents/incidents.json      IncidentDocument
    cancels/<id>.json             Cancel
    retries/<id>.json             Retry

Any file may be malformed (written by another agent, an older or newer fdcore, or by hand):
readers get a :class:`~fdcore.errors.MailboxFileError`, and :class:`ProblemLog` reports each
bad file once instead of every poll.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import Generic, TypeVar

import attrs

from fdcore.abc import Blob, ChangeCheck, Storage, read_mailbox_file
from fdcore.contract.codec import MAX_FILE_BYTES, decode, encode, encode_within
from fdcore.contract.ids import is_valid_id, validate_id
from fdcore.contract.layout import (
    AGENTS,
    CANCELS,
    INCIDENTS,
    REQUESTS,
    RUNS,
    STATUS,
    agent_key,
    cancel_key,
    request_key,
    retry_key,
    status_key,
)
from fdcore.contract.models import (
    AgentRecord,
    ArchiveEntry,
    Attempt,
    Cancel,
    IncidentDocument,
    Outcome,
    Request,
    Retry,
    RunRecord,
    State,
    Status,
)
from fdcore.errors import MailboxFileError

T = TypeVar("T")

log = logging.getLogger("fdcore.mailbox")

#: The field of a file that names it: it must equal the file name's stem (``requests/<id>.json``
#: holds request ``<id>``), live or archived. A file that says otherwise is malformed for every
#: reader alike: the agent never claims it, the queue shows it unreadable.
NAMED_BY: dict[type, str] = {
    Request: "id",
    Status: "request",
    Cancel: "request",
    Retry: "request",
    ArchiveEntry: "request",
}


@attrs.frozen
class Versioned(Generic[T]):
    """A file's parsed content with the etag it was read at (for the next If-Match)."""

    value: T
    etag: str


class ProblemLog:
    """Reports each malformed mailbox file once (per content version), then stays quiet."""

    def __init__(self, agent: str | None = None) -> None:
        self.agent = agent
        self._seen: set[tuple[str, str]] = set()
        self.reported: list[str] = []

    def report(self, key: str, problem: str) -> None:
        if (key, problem) in self._seen:
            return
        self._seen.add((key, problem))
        self.reported.append(problem)
        log.warning("skipping %s", problem)


#: A name as long as an agent's may be: a request's status must fit whichever agent holds it.
LONGEST_NAME = "a" * 128
#: A table's line in ``tables_done`` (``    "sales",\n``) but the name, and more than every
#: other line of :func:`full_status` takes with ids and names at their longest.
TABLE_LINE = 8
STATUS_REST = 1024


def full_status(request: Request, agent: str) -> Status:
    """The status ``request`` reaches when ``agent`` ran every table in one attempt: the least
    its status must hold, so the size it must fit in to run through."""
    now = request.created_at
    return Status(
        request=request.id,
        state=State.SUCCEEDED,
        updated_at=now,
        agent=agent,
        attempts=[Attempt(1, agent, now, now, Outcome.SUCCEEDED, instance="f" * 32)],
        tables_done=list(request.entities),
    )


class Mailbox:
    """One environment's mailbox over a :class:`~fdcore.abc.Storage`."""

    def __init__(
        self,
        storage: Storage,
        problems: ProblemLog | None = None,
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self.storage = storage
        self.problems = problems or ProblemLog()
        self.max_file_bytes = max_file_bytes
        # Malformed files by key, with the etag they had: not decoded again until they change.
        self._malformed: dict[str, tuple[str, MailboxFileError]] = {}
        self._listed: dict[str, dict[str, str | None]] = {}  # prefix -> {key: id, None if bad}

    # -- generic -------------------------------------------------------------------------------

    def read(self, cls: type[T], key: str) -> Versioned[T] | None:
        """The file at ``key`` parsed as ``cls``; None if absent. Raises MailboxFileError."""
        known = self._malformed.get(key)
        if known is not None and self._unchanged(key, known[0]):
            raise known[1].with_traceback(None)  # not read again until it changes
        blob = self.read_file(key)
        if blob is None:
            self._malformed.pop(key, None)
            return None
        if known is not None and known[0] == blob.etag:
            raise known[1].with_traceback(None)
        try:
            value = self.decode(cls, key, blob.data)
        except MailboxFileError as exc:
            self._malformed[key] = (blob.etag, exc)
            raise
        self._malformed.pop(key, None)
        return Versioned(value, blob.etag)

    def decode(self, cls: type[T], key: str, data: bytes) -> T:
        """``data``, the file at ``key``, parsed as ``cls`` within this mailbox's size bound (a
        file written here, say). Raises MailboxFileError."""
        value = decode(cls, data, key, self.max_file_bytes)
        _check_name(value, key)
        return value

    def read_file(self, key: str) -> Blob | None:
        """The file at ``key`` as bytes, within this mailbox's size bound (raises UnreadableFile
        past it, or for what is no regular file); None if absent."""
        return read_mailbox_file(self.storage, key, self.max_file_bytes)

    def _unchanged(self, key: str, etag: str) -> bool:
        """Whether the store can tell, without a read, that ``key`` still has ``etag``."""
        return isinstance(self.storage, ChangeCheck) and self.storage.unchanged(key, etag)

    def read_or_report(self, cls: type[T], key: str) -> Versioned[T] | None:
        """Like :meth:`read`, but a malformed file is reported once and read as absent."""
        return self.read_or_problem(cls, key)[0]

    def read_or_problem(self, cls: type[T], key: str) -> tuple[Versioned[T] | None, str | None]:
        """Like :meth:`read_or_report`, with what is wrong with the file (None if nothing)."""
        try:
            return self.read(cls, key), None
        except MailboxFileError as exc:
            self.problems.report(key, str(exc))
            return None, str(exc)

    def encode(self, key: str, value: object) -> bytes:
        """``value`` as the bytes of ``key``, within this mailbox's size bound (the bound of its
        reads): FileTooLarge, before anything is written, past it."""
        return encode_within(value, key, self.max_file_bytes)

    def fits(self, key: str, value: object) -> bool:
        """Whether ``value`` written at ``key`` would be within the size bound."""
        return len(encode(value)) <= self.max_file_bytes

    def create(self, key: str, value: object) -> str:
        return self.storage.create(key, self.encode(key, value))

    def replace(self, key: str, value: object, etag: str) -> str:
        return self.storage.replace(key, self.encode(key, value), etag)

    def ids(self, prefix: str) -> Iterator[str]:
        """Ids of the ``<id>.json`` files directly under ``prefix``; other names reported.

        A poll lists the same folders over and over: what each name seen before gave (its id,
        or None for a bad name) is kept (pruned to about what the folder holds), so a name is
        checked once, when it appears.
        """
        return iter(self.checked_ids(prefix, list(self.storage.list(prefix))))

    def checked_ids(self, prefix: str, keys: list[str]) -> list[str]:
        """The ids of ``keys`` (a listing of ``prefix``) that are ``<id>.json`` files directly
        under it, in order; other names reported once (see :meth:`ids`)."""
        return [found for found in map(self.checked_names(prefix, keys).get, keys) if found]

    def checked_names(self, prefix: str, keys: list[str]) -> dict[str, str | None]:
        """Each name of ``keys`` (a listing of ``prefix``) seen so far -> its id, or None for a
        name that is not ``<id>.json`` directly under it (reported once)."""
        known = self._listed.setdefault(prefix, {})
        fresh = set(keys).difference(known)
        if fresh:
            for key in keys:  # in listing order, so bad names are reported in that order
                if key in fresh:
                    known[key] = self._id_in(prefix, key)
        if len(known) > 2 * len(keys) + 64:  # names gone from the folder: forget them
            present = set(keys)
            known = {key: found for key, found in known.items() if key in present}
            self._listed[prefix] = known
        return known

    def _id_in(self, prefix: str, key: str) -> str | None:
        """The id of ``key`` directly under ``prefix``; None (a bad name reported) otherwise."""
        id, bad = _id_of_name(prefix, key)
        if bad is not None:
            self.problems.report(*bad)
        return id

    def unfit(self, request: Request, agent: str = LONGEST_NAME) -> str | None:
        """Why ``request`` cannot run through within this mailbox's size bound: its status with
        every table done, held by ``agent`` (by default any agent), would be over it. None if
        it fits."""
        # At most this many bytes, as tables are ids (no escapes): only a request near the
        # bound costs an encoding (a claim of each request asks).
        most = sum(len(table) + TABLE_LINE for table in request.entities) + STATUS_REST
        if most <= self.max_file_bytes:
            return None
        size = len(encode(full_status(request, agent)))
        if size <= self.max_file_bytes:
            return None
        return (
            f"its status would be {size} bytes with its {len(request.entities)} tables done, "
            f"over the bound of {self.max_file_bytes} bytes (max_file_bytes): split it into "
            "smaller requests or raise the bound"
        )

    # -- typed shortcuts -----------------------------------------------------------------------

    def request(self, request_id: str) -> Versioned[Request] | None:
        return self.read(Request, request_key(request_id))

    def status(self, request_id: str) -> Versioned[Status] | None:
        return self.read(Status, status_key(request_id))

    def agent(self, name: str) -> Versioned[AgentRecord] | None:
        return self.read(AgentRecord, agent_key(name))

    def cancel(self, request_id: str) -> Versioned[Cancel] | None:
        """The operator's cancel of the request, if there is one."""
        return self.read(Cancel, cancel_key(request_id))

    def retry(self, request_id: str) -> Versioned[Retry] | None:
        """The link to the request that runs this one again, if it was retried."""
        return self.read(Retry, retry_key(request_id))

    def request_ids(self) -> Iterator[str]:
        return self.ids(REQUESTS)

    def status_ids(self) -> Iterator[str]:
        return self.ids(STATUS)

    def agent_names(self) -> Iterator[str]:
        return self.ids(AGENTS)

    def cancel_ids(self) -> Iterator[str]:
        """The requests an operator cancelled: one listing, whatever their number."""
        return self.ids(CANCELS)

    def runs(self, request_id: str, *, strict: bool = False) -> list[RunRecord]:
        """The request's run log: a malformed record is reported and left out, or with
        ``strict`` raises MailboxFileError (a reader that must not judge from part of it)."""
        read = self.read if strict else self.read_or_report
        records = []
        for key in self.storage.list(f"{RUNS}{validate_id(request_id, 'request id')}/"):
            found = read(RunRecord, key)
            if found is not None:
                records.append(found.value)
        return records

    def incidents(self) -> Versioned[IncidentDocument] | None:
        return self.read(IncidentDocument, INCIDENTS)


@functools.lru_cache(maxsize=4096)
def _id_of_name(prefix: str, key: str) -> tuple[str | None, tuple[str, str] | None]:
    """(the id of ``key`` directly under ``prefix``, None) or (None, (where, the problem)).
    Remembered for the names seen last: each mailbox handle checks each name once, and a
    process with many (the simulator's agents, a monitor's pages) checks the same names."""
    name = key[len(prefix) :]
    if "/" in name:
        # Keys below a folder of its own: reported once (an empty folder is no key).
        folder = prefix + name.partition("/")[0]
        return None, (folder, folder_problem(folder))
    stem, dot, suffix = name.rpartition(".")
    if dot and suffix == "json" and is_valid_id(stem):
        return stem, None
    return None, (key, f"{key}: file name is not '<valid id>.json'")


def folder_problem(folder: str) -> str:
    """What is wrong with ``folder``, listed where a mailbox file belongs."""
    return f"{folder}: is a folder, not a file: not read"


def folders_in_place(prefix: str, keys: list[str], names: dict[str, str | None]) -> dict[str, str]:
    """The ids under ``prefix`` whose ``<id>.json`` is a folder (``keys``, a listing, has keys
    below it; ``names``, what :meth:`Mailbox.checked_names` made of them): id -> the problem."""
    found = {}
    for key in keys:
        if names.get(key) is None:
            first, slash, _ = key[len(prefix) :].partition("/")
            stem, _, suffix = first.rpartition(".")
            if slash and suffix == "json" and is_valid_id(stem):
                found[stem] = folder_problem(prefix + first)
    return found


def _check_name(value: object, key: str) -> None:
    """Raise MailboxFileError if ``value``'s naming field (NAMED_BY) differs from ``key``'s stem."""
    field = NAMED_BY.get(type(value))
    if field is None:
        return
    named = getattr(value, field)
    if f"{named}.json" != key.rpartition("/")[2]:
        raise MailboxFileError(key, field, f"{named!r} does not match the file name")
