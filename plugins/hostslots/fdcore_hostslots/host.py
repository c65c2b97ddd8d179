"""One host folder: the capacity every agent process of the machine shares, and its slot leases.

The layout (version 3, docs/host.md)::

    layout.json              {"version": 3}
    admission.lock           taken first by whoever may add a lease (acquire, set-slots, migrate)
    capacity.lock            taken by every change of capacity.json or of a slot
    capacity.json            {"slot_count": N}, 1 <= N <= 8: the one authority on capacity
    slots/<id>/lease.json    holder, request, table, generation, acquired and renewed times
    slots/<id>/scope.json    {"scope": "job", "request": ...} or {"scope": "task", "table": ...}
    slots/<id>/generation.json  {"generation": G}: the last generation the slot issued

Lock order: admission then capacity, never the other way; release and renew take capacity only.
Every file is replaced whole (written beside, then renamed), so a reader sees old or new content.
Everything fails closed: a file this code cannot read refuses the operation with a coded error,
and a layout newer than this code knows is refused as a rollback (HOST_UPGRADE_ROLLBACK_UNSAFE).

A lease's token is its slot and generation. Each acquisition of a slot takes a generation above
every one the slot issued, and writes it to ``generation.json`` (kept when the lease is released)
before the lease: the slot's generation is the higher of the two files, so losing either one alone
never lets a generation repeat or go back. Renew and release are refused to any generation below
the slot's: a stale holder is fenced even where its lease file was lost and the slot taken again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
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
    RollbackUnsafe,
    ShrinkRefused,
    SlotIdInvalid,
    SlotLost,
    WorkspaceBusy,
)
from fdcore_hostslots.liveness import Holder, is_alive, this_process

LAYOUT_VERSION = 3
OLDER_LAYOUTS = (1, 2)  # what ``migrate`` brings to LAYOUT_VERSION
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
    generation: int  # the slot's fencing generation: rises with every acquisition of the slot
    acquired_at: float
    renewed_at: float
    lease_seconds: float
    process: Holder

    @property
    def token(self) -> str:
        """What renew and release name the lease by: its slot and generation."""
        return f"{self.slot}:{self.generation}"

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
            slot = free[0]
            lease = SlotLease(
                slot=slot,
                holder=holder,
                request=request,
                table=table,
                scope=scope,
                generation=self._generation(slot) + 1,
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
            # the generation first: a crash after it leaves a generation issued, never reused
            self._write(f"{folder}/generation.json", {"generation": lease.generation})
            self._write(f"{folder}/scope.json", scope_doc)
            self._write(f"{folder}/lease.json", _lease_doc(lease))  # the commit point
            return lease

    def renew(self, request: str, token: str) -> SlotLease:
        """Move the lease's renewed time to now; SlotLost if it is no longer on the host."""
        with self._locked("capacity.lock"):
            self._check_layout()
            lease = self._find(request, token)
            self._keep_generation(lease)
            renewed = attrs.evolve(lease, renewed_at=self.clock())
            self._write(f"slots/{lease.slot}/lease.json", _lease_doc(renewed))
            return renewed

    def release(self, request: str, token: str) -> None:
        """Give the lease up; one already recovered by another is left alone."""
        with self._locked("capacity.lock"), contextlib.suppress(SlotLost):
            self._check_layout()
            lease = self._find(request, token)
            self._keep_generation(lease)
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
        """Bring a folder of an older layout to the current one; resume a migration a crash cut
        short.

        Layout 1 kept a desired/effective pair in capacity.json; layouts 2 and 3 keep one slot
        count, the effective one. Layout 3 adds the slots' generations: the drained leases of an
        older layout (random tokens, no generation) are removed. The residue file holds what is
        being migrated until the new layout is published, so a crash at any point leaves a folder
        that ``migrate`` finishes.
        """
        with self._locked("admission.lock"), self._locked("capacity.lock"):
            residue = self._read_optional(RESIDUE, LayoutUnknown)
            if residue is None:
                version = self._layout_version()
                if version == LAYOUT_VERSION:
                    return f"already at layout {LAYOUT_VERSION}"
                self._refuse_newer(version)
                if version not in OLDER_LAYOUTS:
                    raise LayoutUnknown(self.path, f"layout.json: version {version!r} is unknown")
                stored = self._read("capacity.json", LayoutUnknown)
                if _old_slot_count(version, stored) is None:
                    raise LayoutUnknown(
                        self.path,
                        f"layout.json says version {version} but capacity.json is not that "
                        f"layout's and there is no {RESIDUE}: repair by hand, not migrating",
                    )
                live = self._live_leases(MAX_SLOTS, self.clock(), legacy=True)
                if live:
                    raise DrainRequired(
                        self.path,
                        f"{len(live)} live lease(s) (slots {sorted(live)}); stop the agents of "
                        "this host or wait for their tables to end, then migrate",
                    )
                residue = {"from": version, "to": LAYOUT_VERSION, "capacity": stored}
                self._write(RESIDUE, residue)
            old = _old_slot_count(residue.get("from"), residue.get("capacity"))
            if old is None:
                raise LayoutUnknown(self.path, f"{RESIDUE}: not a migration residue")
            count = _checked_count(old, self.path, "the older layout's slot count")
            self._write("capacity.json", {"slot_count": count})
            (self.path / "slots").mkdir(exist_ok=True)
            for _, folder in self._slot_folders():  # drained: every one of them is dead
                (folder / "lease.json").unlink(missing_ok=True)
                (folder / "scope.json").unlink(missing_ok=True)
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

    def _refuse_newer(self, version: object) -> None:
        if type(version) is int and version > LAYOUT_VERSION:
            raise RollbackUnsafe(
                self.path,
                f"layout {version} is newer than this fdcore-hostslots knows ({LAYOUT_VERSION}): "
                "run the release that migrated it (upgrade fdcore-hostslots), not an older one",
            )

    def _check_layout(self) -> None:
        if (self.path / RESIDUE).exists():
            raise LayoutOutdated(self.path, "a migration is unfinished: run `fdcore host migrate`")
        version = self._layout_version()
        self._refuse_newer(version)
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

    def _live_leases(self, count: int, now: float, *, legacy: bool = False) -> dict[int, SlotLease]:
        """The live leases by slot. A live lease at or above ``count`` is refused; an empty or
        dead leftover there (a shrink's) is not occupancy. ``legacy``: an older layout's leases,
        which have no generation."""
        live: dict[int, SlotLease] = {}
        for slot, _ in self._slot_folders():
            lease = self._lease(slot, legacy=legacy)
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
        """The lease ``token`` names, if it is still the slot's newest generation."""
        slot, _, generation = token.partition(":")
        lease = None
        if SLOT_NAME.fullmatch(slot) and int(slot) < MAX_SLOTS and generation.isdecimal():
            lease = self._lease(int(slot))
        if lease is None or lease.request != request or lease.token != token:
            raise SlotLost(self.path, f"no lease of request {request} with token {token!r}")
        issued = self._generation_file(lease.slot) or 0
        if issued > lease.generation:
            raise SlotLost(
                self.path,
                f"slot {lease.slot} issued generation {issued} after this lease's "
                f"{lease.generation}: a newer holder fences it",
            )
        return lease

    def _generation(self, slot: int) -> int:
        """The highest generation ``slot`` issued: of its generation file and its lease file,
        whichever is higher, so that losing either one alone never repeats a generation."""
        lease = self._lease(slot)
        return max(self._generation_file(slot) or 0, 0 if lease is None else lease.generation)

    def _generation_file(self, slot: int) -> int | None:
        name = f"slots/{slot}/generation.json"
        data = self._read_optional(name, LeaseInvalid)
        return (
            None if data is None else _checked_generation(data.get("generation"), self.path, name)
        )

    def _keep_generation(self, lease: SlotLease) -> None:
        """Write the generation file again if it was lost, before the lease file changes: the
        lease file alone never carries the slot's last generation for long."""
        if self._generation_file(lease.slot) is None:
            self._write(f"slots/{lease.slot}/generation.json", {"generation": lease.generation})

    def _lease(self, slot: int, *, legacy: bool = False) -> SlotLease | None:
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
                generation=0 if legacy else _checked_generation(data["generation"], self.path, key),
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


def _checked_generation(value: object, host: Path, where: str) -> int:
    if type(value) is not int or value < 1:
        raise LeaseInvalid(host, f"{where}: generation {value!r} is not a whole number from 1")
    return value


def _old_slot_count(version: object, capacity: object) -> object:
    """The slot count an older layout's capacity.json carries, None if it is not that layout's:
    layout 1 kept a desired/effective pair (the effective one counts), layout 2 a slot count."""
    if not isinstance(capacity, dict):
        return None
    if version == 1 and set(capacity) >= {"desired", "effective"} and "slot_count" not in capacity:
        return capacity["effective"]
    if version == 2 and "slot_count" in capacity and "effective" not in capacity:
        return capacity["slot_count"]
    return None


def _lease_doc(lease: SlotLease) -> dict[str, Any]:
    return {
        "holder": lease.holder,
        "request": lease.request,
        "table": lease.table,
        "generation": lease.generation,
        "acquired_at": _stamp(lease.acquired_at),
        "renewed_at": _stamp(lease.renewed_at),
        "lease_seconds": lease.lease_seconds,
        "process": attrs.asdict(lease.process),
    }
