"""A plugin installed the way pip would leave it, for tests of what users install.

One module and a ``*.dist-info`` with an entry point in the ``fdcore`` group, in a folder that
``PYTHONPATH`` (a subprocess) or ``sys.path`` (this process) makes visible.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def install_distribution(
    site: Path,
    distribution: str,
    module: str,
    source: str,
    *,
    entry_point: str = "broken",
    version: str = "0.1",
) -> dict[str, str]:
    """Write ``module`` (``source``, dedented) and its distribution under ``site``; return the
    environment of a subprocess that finds it."""
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    (info / "entry_points.txt").write_text(f"[fdcore]\n{entry_point} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path}


def fdcore_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``fdcore ARGS`` in a new process, with ``env`` over this one's environment."""
    return subprocess.run(
        [sys.executable, "-m", "fdcore.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
