"""One host folder: the capacity every agent process of the machine shares, and its slot leases.

The layout (version 2, docs/host.md)::

    layout.json              {"version": 2}
    admission.lock           taken first by whoever may add a lease (acquire, set-slots, migrate)
    capacity.lock            taken by every change of capacity.json or of a slot
    capacity.json            {"slot_count": N}, 1 <= N <= 8: the one authority on capacity
    slots/<id>/lease.json    holder, request, table, token, acquired and renewed times
    slots/<id>/scope.json    {"scope": "job", "request": ...} or {"scope": "task", "table": ...}

Lock order: admission then capacity, never the other way; release and renew take capacity only.
Every file is replaced whole (written beside, then renamed), so a reader sees old or new content.
Everything fails closed: a file this code cannot read refuses the operation with a coded error.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from fdcore.abc import HostSlots
from fdcore_hostslots.errors import (
    CapacityBusy,
    CapacityInvalid,
    DrainRequired,
    HostSlotError,
    LayoutOutdated,
    LayoutUnknown,
    LeaseInvalid,
    ShrinkRefused,
    SlotIdInvalid,
    SlotLost,
    WorkspaceBusy,
)
from fdcore_hostslots.liveness import Holder, is_alive, this_process

LAYOUT_VERSION = 2
MAX_SLOTS = 8
SCOPES = ("job", "task")
MAX_FILE_BYTES = 64 * 1024  # every file here is a few hundred bytes: more is not ours
RESIDUE = "migrate.residue"
SLOT_NAME = re.compile(r"0|[1-9][0-9]*")  # canonical decimal: no sign, no leading zero

Clock = Callable[[], float]  # seconds since the epoch
Liveness = Callable[[Holder], "bool | None"]


@attrs.frozen
class SlotLease:
    """A live lease on one slot of the host; found again by ``request`` and ``token``."""

    slot: int
    holder: str
    request: str
    table: str
    scope: str
    token: str
    acquired_at: float
    renewed_at: float
    lease_seconds: float
    process: Holder

    def expired(self, now: float) -> bool:
        return now > self.renewed_at + self.lease_seconds


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


class Host:
    """The host folder at ``path``. ``clock`` and ``alive`` are injectable for tests."""

    def __init__(self, path: str | Path, *, clock: Clock = time.time, alive: Liveness = is_alive):
        self.path = Path(path)
        self.clock = clock
        self.alive = alive

    # -- operations --------------------------------------------------------------------------

    def init(self) -> bool:
        """Create the folder at the current layout with one slot; False if it already was one.

        ``{"slot_count": 1}`` is written here and only here: nothing else invents a capacity.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        with self._locked("admission.lock"), self._locked("capacity.lock"):
            if (self.path / "layout.json").exists() or (self.path / "capacity.json").exists():
                self._check_layout()
                return False
            (self.path / "slots").mkdir(exist_ok=True)
            self._write("capacity.json", {"slot_count": 1})
            self._write("layout.json", {"version": LAYOUT_VERSION})  # published last
            return True

    def acquire(
        self, *, holder: str, request: str, table: str, scope: str, lease_seconds: float
    ) -> SlotLease:
        """Lease a free slot the host picks. Raise WorkspaceBusy or CapacityBusy when none fits."""
        if scope not in SCOPES:
            raise HostSlotError(self.path, f"scope {scope!r}: must be one of {', '.join(SCOPES)}")
        with self._locked("admission.lock"), self._locked("capacity.lock"):
            self._check_layout()
            count = self.slot_count()
            now = self.clock()
            live = self._live_leases(count, now)
            if scope == "task":
                for other in live.values():
                    if other.scope == "task" and other.table == table:
                        raise WorkspaceBusy(
                            self.path,
                            f"table {table} already runs on this host (slot {other.slot}, "
                            f"request {other.request})",
                        )
            free = [slot for slot in range(count) if slot not in live]
            if not free:
                raise CapacityBusy(self.path, f"all {count} slot(s) are busy")
            lease = SlotLease(
                slot=free[0],
                holder=holder,
                request=request,
                table=table,
                scope=scope,
                token=uuid.uuid4().hex,
                acquired_at=now,
                renewed_at=now,
                lease_seconds=lease_seconds,
                process=this_process(),
            )
            folder = f"slots/{lease.slot}"
            (self.path / folder).mkdir(parents=True, exist_ok=True)
            scope_doc = (
                {"scope": "task", "table": table}
                if scope == "task"
                else {"scope": "job", "request": request}
            )
            self._write(f"{folder}/scope.json", scope_doc)
            self._write(f"{folder}/lease.json", _lease_doc(lease))  # the commit point
            return lease

    def renew(self, request: str, token: str) -> SlotLease:
        """Move the lease's renewed time to now; SlotLost if it is no longer on the host."""
        with self._locked("capacity.lock"):
            lease = self._find(request, token)
            renewed = attrs.evolve(lease, renewed_at=self.clock())
            self._write(f"slots/{lease.slot}/lease.json", _lease_doc(renewed))
            return renewed

    def release(self, request: str, token: str) -> None:
        """Give the lease up; one already recovered by another is left alone."""
        with self._locked("capacity.lock"), contextlib.suppress(SlotLost):
            lease = self._find(request, token)
            (self.path / f"slots/{lease.slot}/lease.json").unlink(missing_ok=True)
            (self.path / f"slots/{lease.slot}/scope.json").unlink(missing_ok=True)

    def slots(self) -> HostSlots:
        """Configured and busy slots (``fdcore host probe``): free while one slot is."""
        with self._locked("capacity.lock"):
            self._check_layout()
            count = self.slot_count()
            return HostSlots(count, len(self._live_leases(count, self.clock())))

    def leases(self) -> list[SlotLease]:
        """The live leases, by slot (what ``fdcore host probe`` lists)."""
        with self._locked("capacity.lock"):
            self._check_layout()
            count = self.slot_count()
            return [lease for _, lease in sorted(self._live_leases(count, self.clock()).items())]

    def set_slots(self, count: object) -> int:
        """Set the slot count; a shrink below a live lease's slot is refused, never moved."""
        count = _checked_count(count, self.path, "slot count")
        with self._locked("admission.lock"), self._locked("capacity.lock"):
            self._check_layout()
            # every live lease, whatever capacity.json says now (set-slots also repairs it)
            live = self._live_leases(MAX_SLOTS, self.clock())
            above = sorted(slot for slot in live if slot >= count)
            if above:
                held = ", ".join(f"{slot} (request {live[slot].request})" for slot in above)
                raise ShrinkRefused(
                    self.path,
                    f"cannot set {count} slot(s): live lease on slot {held}; "
                    "wait until it ends, then try again",
                )
            self._write("capacity.json", {"slot_count": count})
            return count

    def migrate(self) -> str:
        """Bring a layout 1 folder to layout 2; resume a migration a crash cut short.

        Layout 1 kept a desired/effective pair in capacity.json; layout 2 keeps one slot count,
        the effective one. The residue file holds what is being migrated until the new layout is
        published, so a crash at any point leaves a folder that ``migrate`` finishes.
        """
        with self._locked("admission.lock"), self._locked("capacity.lock"):
            residue = self._read_optional(RESIDUE, LayoutUnknown)
            if residue is None:
                version = self._layout_version()
                if version == LAYOUT_VERSION:
                    return f"already at layout {LAYOUT_VERSION}"
                if version != 1:
                    raise LayoutUnknown(self.path, f"layout.json: version {version!r} is unknown")
                stored = self._read("capacity.json", LayoutUnknown)
                if not _is_layout1_capacity(stored):
                    raise LayoutUnknown(
                        self.path,
                        "layout.json says version 1 but capacity.json is not layout 1's and "
                        f"there is no {RESIDUE}: repair by hand, not migrating",
                    )
                live = self._live_leases(MAX_SLOTS, self.clock())
                if live:
                    raise DrainRequired(
                        self.path,
                        f"{len(live)} live lease(s) (slots {sorted(live)}); stop the agents of "
                        "this host or wait for their tables to end, then migrate",
                    )
                residue = {"from": 1, "to": LAYOUT_VERSION, "capacity": stored}
                self._write(RESIDUE, residue)
            old = residue.get("capacity")
            if not _is_layout1_capacity(old):
                raise LayoutUnknown(self.path, f"{RESIDUE}: not a migration residue")
            assert isinstance(old, dict)
            count = _checked_count(old["effective"], self.path, "layout 1 effective slot count")
            self._write("capacity.json", {"slot_count": count})
            (self.path / "slots").mkdir(exist_ok=True)
            self._write("layout.json", {"version": LAYOUT_VERSION})  # published
            (self.path / RESIDUE).unlink()
            return f"migrated to layout {LAYOUT_VERSION} with {count} slot(s)"

    # -- reading the folder ------------------------------------------------------------------

    def slot_count(self) -> int:
        data = self._read("capacity.json", CapacityInvalid)
        return _checked_count(data.get("slot_count"), self.path, "capacity.json: slot_count")

    def _layout_version(self) -> object:
        data = self._read_optional("layout.json", LayoutUnknown)
        if data is None:
            raise LayoutUnknown(self.path, "no layout.json: not a host folder (fdcore host init)")
        return data.get("version")

    def _check_layout(self) -> None:
        if (self.path / RESIDUE).exists():
            raise LayoutOutdated(self.path, "a migration is unfinished: run `fdcore host migrate`")
        version = self._layout_version()
        if type(version) is int and version < LAYOUT_VERSION:
            raise LayoutOutdated(
                self.path,
                f"layout {version} is older than {LAYOUT_VERSION}: run `fdcore host migrate`",
            )
        if version != LAYOUT_VERSION:
            raise LayoutUnknown(self.path, f"layout.json: version {version!r} is unknown")

    def _slot_folders(self) -> Iterator[tuple[int, Path]]:
        """Every slot folder, fail closed on a name that is not a slot id."""
        folder = self.path / "slots"
        if not folder.is_dir():
            return
        for entry in sorted(folder.iterdir()):
            if not entry.is_dir() or not SLOT_NAME.fullmatch(entry.name):
                raise SlotIdInvalid(self.path, f"slots/{entry.name}: not a slot id (0..7)")
            slot = int(entry.name)
            if slot >= MAX_SLOTS:
                raise SlotIdInvalid(self.path, f"slots/{entry.name}: not a slot id (0..7)")
            yield slot, entry

    def _live_leases(self, count: int, now: float) -> dict[int, SlotLease]:
        """The live leases by slot. A live lease at or above ``count`` is refused; an empty or
        dead leftover there (a shrink's) is not occupancy."""
        live: dict[int, SlotLease] = {}
        for slot, _ in self._slot_folders():
            lease = self._lease(slot)
            if lease is None or not self._is_live(lease, now):
                continue
            if slot >= count:
                raise SlotIdInvalid(
                    self.path,
                    f"slots/{slot} holds a live lease (request {lease.request}) but "
                    f"capacity.json allows slots 0..{count - 1}",
                )
            live[slot] = lease
        return live

    def _is_live(self, lease: SlotLease, now: float) -> bool:
        """Live until its lease time has passed, and past it while its holder still runs."""
        return not lease.expired(now) or self.alive(lease.process) is True

    def _find(self, request: str, token: str) -> SlotLease:
        for slot, _ in self._slot_folders():
            lease = self._lease(slot)
            if lease is not None and lease.request == request and lease.token == token:
                return lease
        raise SlotLost(self.path, f"no lease of request {request} with that token")

    def _lease(self, slot: int) -> SlotLease | None:
        key = f"slots/{slot}/lease.json"
        data = self._read_optional(key, LeaseInvalid)
        if data is None:
            return None
        scope = self._read(f"slots/{slot}/scope.json", LeaseInvalid)
        try:
            process = data["process"]
            return SlotLease(
                slot=slot,
                holder=str(data["holder"]),
                request=str(data["request"]),
                table=str(data["table"]),
                scope=str(scope["scope"]),
                token=str(data["token"]),
                acquired_at=datetime.fromisoformat(data["acquired_at"]).timestamp(),
                renewed_at=datetime.fromisoformat(data["renewed_at"]).timestamp(),
                lease_seconds=float(data["lease_seconds"]),
                process=Holder(int(process["pid"]), process.get("boot_id"), process.get("start")),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise LeaseInvalid(self.path, f"{key}: malformed ({exc!r})") from None

    # -- files -------------------------------------------------------------------------------

    def _read(self, name: str, error: type[HostSlotError]) -> dict[str, Any]:
        data = self._read_optional(name, error)
        if data is None:
            raise error(self.path, f"{name}: missing")
        return data

    def _read_optional(self, name: str, error: type[HostSlotError]) -> dict[str, Any] | None:
        """The JSON object in ``name``, None if absent; read bounded, refused if malformed."""
        path = self.path / name
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise error(self.path, f"{name}: cannot read ({exc.strerror})") from None
        if len(raw) > MAX_FILE_BYTES:
            raise error(self.path, f"{name}: larger than {MAX_FILE_BYTES} bytes")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise error(self.path, f"{name}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise error(self.path, f"{name}: not a JSON object")
        return data

    def _write(self, name: str, data: dict[str, Any]) -> None:
        """Replace ``name`` whole (a scratch file renamed over it), or one line saying why not:
        a folder or an unwritable place where the file belongs leaves it as it was."""
        path = self.path / name
        scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with scratch.open("w") as handle:
                json.dump(data, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(scratch, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                scratch.unlink()
            raise HostSlotError(self.path, f"{name}: cannot write ({exc.strerror})") from None

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        fd = os.open(self.path / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor drops the lock


def _checked_count(value: object, host: Path, what: str) -> int:
    if type(value) is not int or not 1 <= value <= MAX_SLOTS:
        raise CapacityInvalid(host, f"{what} {value!r}: must be an integer from 1 to {MAX_SLOTS}")
    return value


def _is_layout1_capacity(data: object) -> bool:
    return (
        isinstance(data, dict)
        and set(data) >= {"desired", "effective"}
        and "slot_count" not in data
    )


def _lease_doc(lease: SlotLease) -> dict[str, Any]:
    return {
        "holder": lease.holder,
        "request": lease.request,
        "table": lease.table,
        "token": lease.token,
        "acquired_at": _stamp(lease.acquired_at),
        "renewed_at": _stamp(lease.renewed_at),
        "lease_seconds": lease.lease_seconds,
        "process": attrs.asdict(lease.process),
    }
