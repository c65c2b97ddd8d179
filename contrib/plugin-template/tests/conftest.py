"""``template_only``: fdcore with this plugin and no other, as if it were the only one installed.

The plugin is "installed" the way pip records it, a ``dist-info`` folder whose entry points are
the ones in this distribution's pyproject.toml, on a path of its own; every other plugin's entry
point is disabled. In-process tests see it through ``sys.path``; the fixture's value is the
environment that gives a subprocess the same view.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from fdcore.testing.plugins import DISABLE_VARIABLE, ENTRY_POINT_GROUP

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).parents[1]  # the distribution: pyproject.toml and the package


@pytest.fixture
def template_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ours = project["entry-points"][ENTRY_POINT_GROUP]
    site = tmp_path / "site"
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    lines = [f"{name} = {target}" for name, target in ours.items()]
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n" + "\n".join(lines) + "\n")
    others = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)} - set(ours)
    monkeypatch.setenv(DISABLE_VARIABLE, ",".join(sorted(others)))
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.syspath_prepend(str(site))
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}
