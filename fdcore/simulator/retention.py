"""A retention process beside the fleet: ``fdcore retention run``, one store call at a time.

The agents' own retention runs inside their polls, which are atomic here; the command is a
process of its own, whose store calls land *between* an agent's (between its listing of
``status/`` and of ``requests/``, say). :class:`RetentionProcess` runs the command's code,
:func:`fdcore.agent.retention.run_retention`, unchanged, on a thread of its own, and lets it
make one store call per :meth:`~RetentionProcess.step`: only one of the world and the run ever
moves at a time, so a seed still fixes the whole interleaving. The world steps it between its
events and, as its plan says, just before an agent's store calls.

A run killed mid-move (as the fault suite SIGKILLs ``fdcore retention run``) raises
:class:`Killed` at its next store call and leaves what it did.
"""

from __future__ import annotations

import threading
from datetime import datetime

from fdcore.agent.retention import Tally, run_retention
from fdcore.errors import FdcoreError
from fdcore.mailbox.access import Mailbox, ProblemLog
from fdcore.settings.agent_toml import RetentionConfig
from fdcore.simulator.store import FaultyStore


class Killed(BaseException):
    """Ends a retention run at its next store call (a SIGKILL): no handler of the run sees it."""


class RetentionProcess:
    """One ``fdcore retention run --keep KEEP --grace GRACE`` at a time, stepped by the world."""

    def __init__(self, store: FaultyStore, keep: float, grace: float) -> None:
        self.store = store
        self.settings = RetentionConfig(keep=keep)
        self.grace = grace
        self.store.before = self._gate
        self._go = threading.Semaphore(0)  # the run may make its next store call
        self._back = threading.Semaphore(0)  # the run is at its next store call, or ended
        self._thread: threading.Thread | None = None
        self._killed = False
        self.ended = True  # no run under way
        self.tally = Tally()  # what every run moved, kept and met
        self.failed = 0  # runs ended by a store error (the command would exit with one line)

    @property
    def running(self) -> bool:
        return not self.ended

    def start(self, now: datetime) -> None:
        """Start a run at ``now`` (its one ``now``, as the command takes); it makes no store
        call before the first :meth:`step`."""
        assert self.ended, "one run at a time"
        self.ended = False
        self._killed = False
        self._thread = threading.Thread(target=self._main, args=(now,), daemon=True)
        self._thread.start()
        self._back.acquire()  # parked before its first store call

    def step(self) -> None:
        """Let the run make its next store call (and reach the one after, or end)."""
        if self.ended:
            return
        self._go.release()
        self._back.acquire()
        if self.ended:
            self._join()

    def kill(self) -> None:
        """End the run at its next store call, leaving what it did."""
        if self.ended:
            return
        self._killed = True
        self.step()

    def _main(self, now: datetime) -> None:
        try:
            self._gate()
            mailbox = Mailbox(self.store, ProblemLog("retention"))
            self.tally.add(run_retention(mailbox, now, self.settings, self.grace))
        except Killed:
            pass
        except FdcoreError:  # a store error ends the command (one line, exit 1)
            self.failed += 1
        finally:
            self.ended = True
            self._back.release()

    def _gate(self) -> None:
        """Called by the run's store before each call: park until the world steps the run."""
        self._back.release()
        self._go.acquire()
        if self._killed:
            raise Killed

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
