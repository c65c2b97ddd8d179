"""Output on a terminal: a block redrawn in place (``fdcore queue --watch``, the demo) and a
progress line for long commands (``doctor``, ``simulate``). Off a terminal (a pipe, a file) the
live view prints each frame whole and the progress line prints nothing, so piped output stays
what a script reads.

Layer 0, beside errors and the clock: the command line and the simulator's command share it.
"""

from __future__ import annotations

import math
import shutil
import sys
from typing import TextIO


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class LiveView:
    """A block of text redrawn in place on a terminal, each frame over the last; to a pipe or a
    file every frame is printed whole, one after another (a log reads top to bottom)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.terminal = is_terminal(self.stream)
        self._frame = ""
        self._rows = 0  # the terminal rows the frame on screen takes

    def show(self, frame: str) -> None:
        """Replace the frame on screen with ``frame``."""
        self._erase()
        self._frame = frame
        self._draw()

    def note(self, line: str) -> None:
        """A line that stays (an event), printed above the frame, which is drawn again below."""
        self._erase()
        self.stream.write(line + "\n")
        self._draw()

    def _erase(self) -> None:
        if self.terminal and self._rows:
            # Up to the first row of the frame, then clear from there to the end of the screen.
            self.stream.write(f"\x1b[{self._rows}F\x1b[J")
        self._rows = 0

    def _draw(self) -> None:
        if not self._frame:
            self.stream.flush()
            return
        self.stream.write(self._frame + "\n")
        self.stream.flush()
        if self.terminal:
            width = max(1, shutil.get_terminal_size().columns)
            lines = self._frame.split("\n")
            self._rows = sum(max(1, math.ceil(len(line) / width)) for line in lines)
        else:
            self._frame = ""  # printed once: a note after it does not print it again


class Progress:
    """One line of progress on a terminal (stderr), rewritten in place and cleared at the end;
    nothing at all when stderr is not a terminal, so piped output stays clean."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.terminal = is_terminal(self.stream)

    def update(self, text: str) -> None:
        if self.terminal:
            width = max(1, shutil.get_terminal_size().columns - 1)
            self.stream.write("\r\x1b[K" + text[:width])
            self.stream.flush()

    def done(self) -> None:
        if self.terminal:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
