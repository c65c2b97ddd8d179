"""What an agent runs as and which release it is: written into every run record.

``run_as`` is the identity a table ran as: ``[runner] run_as`` when configured (the runner gets
it as ``FDCORE_RUN_AS``), else the agent process's ``user@host``. The release is fdcore's
version and that of every installed distribution providing fdcore plugins, read once per
process: a fleet upgraded between two attempts of a request shows both releases in its runs.
"""

from __future__ import annotations

import functools
from importlib import metadata

from fdcore import __version__
from fdcore.mailbox.audit import process_user

#: The entry-point group of fdcore's plugins.
GROUP = "fdcore"


@functools.cache
def release() -> dict[str, str]:
    """``{"fdcore": version, <plugin distribution>: version, ...}``, sorted by name."""
    found = {"fdcore": __version__}
    for entry in metadata.entry_points(group=GROUP):
        dist = entry.dist
        if dist is not None and dist.metadata is not None:
            found.setdefault(dist.metadata["Name"], dist.version)
    return dict(sorted(found.items()))


def run_as(configured: str | None) -> str:
    """The identity a table runs as: the configured name, else the process's ``user@host``."""
    return configured or process_user()
