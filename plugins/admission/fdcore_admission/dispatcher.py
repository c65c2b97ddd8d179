"""The dispatcher: holds each waiting lane through the descriptor it was handed, and admits.

The rules, each checked by plugins/admission/tests:

- enqueue takes exactly one descriptor, open on the expected lane's lock file (same inode),
  only while the folder is in dispatcher mode, with an entry that has a queue start and a
  priority; every refusal closes every descriptor received. The descriptor keeps the lane held.
- admission moves a row ``queued`` -> ``starting`` with a fresh token; a claim needs ``starting``
  and that token, and a wrong one leaves the row and the descriptor with the dispatcher.
- a start not claimed within 60 s (strictly more) returns to ``queued`` with its queue start and
  priority, without a token.
- a claim asked again with the token the lane's last claim took (its reply was lost) is answered
  "claimed before", without a descriptor: the one sent then closed with the lost reply, and the
  lane is the driver's if it can hold it now (:func:`fdcore_admission.wire.claim`).
- on restart, a row whose lane is free is kept (``queued``, no token) and held again; a row whose
  lane someone else holds is dropped: the lane is never stolen.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fdcore_admission.environment import DEFAULT_PREFIXES, minimise
from fdcore_admission.errors import AdmissionRefused
from fdcore_admission.lanes import Lanes, hold
from fdcore_admission.queue import QUEUED, STARTING, Queue, Row

START_TIMEOUT = 60.0  # seconds a ``starting`` row waits for its claim
MODE_FILE = "mode.json"


def set_dispatcher_mode(folder: str | Path, on: bool) -> None:
    """Mark the host folder as handing lanes to a dispatcher (or not)."""
    path = Path(folder) / MODE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mode": "dispatcher" if on else "direct"}))


def in_dispatcher_mode(folder: str | Path) -> bool:
    try:
        with (Path(folder) / MODE_FILE).open("rb") as handle:
            data = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("mode") == "dispatcher"


class Dispatcher:
    def __init__(
        self,
        folder: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        prefixes: Iterable[str] = DEFAULT_PREFIXES,
    ) -> None:
        self.folder = Path(folder)
        self.clock = clock
        self.prefixes = tuple(prefixes)
        self.lanes = Lanes(self.folder)
        self.queue = Queue(self.folder, clock)
        self.held: dict[str, int] = {}  # lane -> the descriptor holding it

    def close(self) -> None:
        """Let every held lane go (the rows stay: a restart recovers them)."""
        for fd in self.held.values():
            os.close(fd)
        self.held.clear()
        self.queue.close()

    # -- enqueue -------------------------------------------------------------------------------

    def enqueue(self, lane: str, fds: Sequence[int], entry: Mapping[str, Any]) -> Row:
        """Take over ``lane`` through the one descriptor in ``fds`` and queue ``entry``."""
        try:
            row = self._check_enqueue(lane, fds, entry)
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
        fd = fds[0]
        os.set_inheritable(fd, False)  # a child the dispatcher starts must not hold the lane
        self.held[lane] = fd
        self.queue.put(row)
        return row

    def _check_enqueue(self, lane: str, fds: Sequence[int], entry: Mapping[str, Any]) -> Row:
        if not in_dispatcher_mode(self.folder):
            raise AdmissionRefused(
                "ADMISSION_NOT_DISPATCHER", f"{self.folder}: not in dispatcher mode"
            )
        if len(fds) != 1:
            raise AdmissionRefused(
                "ADMISSION_DESCRIPTORS", f"lane {lane}: {len(fds)} descriptors, exactly 1 expected"
            )
        if not self.lanes.is_lane(fds[0], lane):
            raise AdmissionRefused(
                "ADMISSION_LANE_MISMATCH", f"lane {lane}: the descriptor is not its lock file"
            )
        if lane in self.held:
            raise AdmissionRefused("ADMISSION_LANE_QUEUED", f"lane {lane}: already queued")
        queued_at, priority = entry.get("queued_at"), entry.get("priority")
        if not isinstance(queued_at, (int, float)) or isinstance(queued_at, bool):
            raise AdmissionRefused("ADMISSION_ENTRY_INVALID", f"lane {lane}: no queue start")
        if type(priority) is not int:
            raise AdmissionRefused("ADMISSION_ENTRY_INVALID", f"lane {lane}: no priority")
        arguments = entry.get("arguments", [])
        if not isinstance(arguments, list) or not all(isinstance(a, str) for a in arguments):
            raise AdmissionRefused("ADMISSION_ENTRY_INVALID", f"lane {lane}: arguments not text")
        environment = entry.get("environment", {})
        if not isinstance(environment, Mapping):
            raise AdmissionRefused("ADMISSION_ENTRY_INVALID", f"lane {lane}: environment not a map")
        kept = minimise(environment, self.prefixes)
        if not hold(fds[0]):  # the same lock as the sender's, or a lane nobody held
            raise AdmissionRefused("ADMISSION_LANE_BUSY", f"lane {lane}: held by another")
        return Row(lane, float(queued_at), priority, arguments=tuple(arguments), environment=kept)

    # -- admission and claim -------------------------------------------------------------------

    def admit_next(self) -> Row | None:
        """Move the first queued row (priority, then queue start) to ``starting``."""
        self.expire()
        for row in self.queue.rows():
            if row.stage == QUEUED:
                started = attrs.evolve(
                    row, stage=STARTING, token=uuid.uuid4().hex, starting_at=self.clock()
                )
                self.queue.put(started)
                return started
        return None

    def claim(self, lane: str, token: object) -> int | None:
        """The descriptor holding ``lane``, for the driver that was told ``token``; the row goes,
        and the claim's timings are recorded. None if ``token`` already claimed the lane (the
        lane's last claim, no row queued since): asking again is answered the same way.

        The caller passes the descriptor on and then closes it: the lane is held throughout.
        """
        self.expire()
        row = self.queue.get(lane)
        if row is None and isinstance(token, str):
            last = self.queue.last_claim(lane)
            if last is not None and last.token == token:
                return None
        if row is None or row.stage != STARTING:
            stage = "not queued" if row is None else row.stage
            raise AdmissionRefused("ADMISSION_NOT_STARTING", f"lane {lane}: {stage}")
        if not isinstance(token, str) or token != row.token:
            raise AdmissionRefused("ADMISSION_TOKEN_MISMATCH", f"lane {lane}: wrong token")
        self.queue.take(row, self.clock())
        return self.held.pop(lane)

    def expire(self) -> None:
        """Return every start unclaimed for more than 60 s to ``queued``."""
        now = self.clock()
        for row in self.queue.rows():
            late = row.starting_at is not None and now - row.starting_at > START_TIMEOUT
            if row.stage == STARTING and late:
                self.queue.put(attrs.evolve(row, stage=QUEUED, token=None, starting_at=None))

    # -- restart -------------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Hold again every stored row's lane that is free; drop the rows of lanes held by
        others. Return the lanes dropped."""
        dropped = []
        for row in self.queue.rows():
            if row.lane in self.held:
                continue
            fd = self.lanes.try_hold(row.lane)
            if fd is None:
                self.queue.remove(row.lane)  # someone else holds it: never steal a lane
                dropped.append(row.lane)
                continue
            self.held[row.lane] = fd
            self.queue.put(attrs.evolve(row, stage=QUEUED, token=None, starting_at=None))
        return dropped
