"""``fdcore ARGS`` in the test's process, as a user runs it: a plugin's own command, or a core
command on the plugin (``fdcore notify test`` through its notifier, ``fdcore config check`` of a
file naming it). Its output goes to this process's stdout and stderr: read it with pytest's
``capsys``. For a process of its own, run ``[sys.executable, "-m", "fdcore.cli", *args]``."""

from __future__ import annotations

from fdcore.cli.main import ERROR, main

__all__ = ["ERROR", "run_fdcore"]


def run_fdcore(*args: str) -> int:
    """Run ``fdcore ARGS`` here and return its exit code: 0, 1 (what it checked failed),
    :data:`ERROR` (2: a usage or configuration error, one line on stderr)."""
    return main(list(args))
