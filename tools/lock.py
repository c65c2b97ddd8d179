"""Write the constraints file ``make setup`` installs with: the newest versions of every
third-party distribution the project's own distributions need, with all their extras.

Each interpreter given resolves on its own in a throwaway venv (every distribution installed
editable with every extra, then ``pip freeze``, the project's own editable distributions left
out). Where two interpreters' resolutions differ (a dependency only older Pythons need, such as
tomli below 3.11, or a release that dropped an older Python), each pin carries the
``python_version`` range it was resolved for, so one file installs on every supported Python.

Usage: python tools/lock.py OUT PYTHON [PYTHON...]   (make lock; LOCK_PYTHONS names them)
"""

from __future__ import annotations

import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: Installed first, so the editable installs need no isolated build environment each.
BUILD = "setuptools>=70.1"
#: Comes with every venv; not the project's to pin.
UNPINNED = {"pip"}

Pins = dict[str, str]  # normalised name -> version


def distributions() -> list[Path]:
    """The project's own distributions: the core and every folder under plugins/ and contrib/."""
    folders = [ROOT, *sorted(ROOT.glob("plugins/*")), *sorted(ROOT.glob("contrib/*"))]
    return [folder for folder in folders if (folder / "pyproject.toml").is_file()]


def editable(folder: Path) -> str:
    """``pip install`` argument installing ``folder`` editable with every extra it declares."""
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = ",".join(sorted(project.get("optional-dependencies", {})))
    return f"{folder}[{extras}]" if extras else str(folder)


def normalised(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def resolve(python: str, scratch: Path) -> tuple[str, Pins]:
    """(``major.minor.micro``, pins) of a fresh resolution on ``python``."""
    try:
        version = subprocess.run(
            [python, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"lock: cannot run {python!r} ({error}); LOCK_PYTHONS names the interpreters")
    venv = scratch / version
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    print(f"lock: resolving on Python {version} in {venv}", flush=True)
    subprocess.run([*pip, "install", BUILD], check=True)
    targets = [arg for folder in distributions() for arg in ("-e", editable(folder))]
    if subprocess.run([*pip, "install", "--no-build-isolation", *targets]).returncode != 0:
        sys.exit(f"lock: the distributions do not install on Python {version} (pip's error above)")
    frozen = subprocess.run(
        [*pip, "freeze", "--all", "--exclude-editable"], capture_output=True, text=True, check=True
    ).stdout
    pins: Pins = {}
    for line in frozen.splitlines():
        name, _, pinned = line.partition("==")
        if not pinned:  # a direct reference (path or URL): not a release a constraint can name
            sys.exit(f"lock: Python {version} installed {line!r}, which is not a release")
        if normalised(name) not in UNPINNED:
            pins[normalised(name)] = pinned
    return version, pins


def marker(low: str | None, high: str | None) -> str:
    """The environment marker of a pin for Pythons from ``low`` up to ``high`` (either open)."""
    parts = []
    if low:
        parts.append(f'python_version >= "{low}"')
    if high:
        parts.append(f'python_version < "{high}"')
    return f"; {' and '.join(parts)}" if parts else ""


def merged(resolutions: Sequence[tuple[str, Pins]]) -> list[str]:
    """One line per pin: a pin resolved on the interpreters from A to B applies from A's minor
    version up to the next resolved interpreter's (below the oldest, from the newest: unbounded)."""
    minors = [".".join(version.split(".")[:2]) for version, _ in resolutions]
    lines = []
    for name in sorted({name for _, pins in resolutions for name in pins}):
        versions = [pins.get(name) for _, pins in resolutions]
        start = 0
        for end in range(1, len(versions) + 1):
            if end < len(versions) and versions[end] == versions[start]:
                continue
            if versions[start] is not None:
                low = minors[start] if start > 0 else None
                high = minors[end] if end < len(versions) else None
                lines.append(f"{name}=={versions[start]}{marker(low, high)}")
            start = end
    return lines


def main(argv: Sequence[str]) -> None:
    if len(argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out, pythons = Path(argv[0]), argv[1:]
    with tempfile.TemporaryDirectory(prefix="fdcore-lock-") as scratch:
        resolutions = sorted(
            (resolve(python, Path(scratch)) for python in pythons),
            key=lambda item: tuple(int(part) for part in item[0].split(".")),
        )
    minors = [".".join(version.split(".")[:2]) for version, _ in resolutions]
    if len(set(minors)) != len(minors):
        sys.exit(f"lock: two interpreters of one Python version ({', '.join(minors)})")
    header = [
        "# Generated by `make lock` (tools/lock.py); do not edit by hand.",
        "# Every third-party distribution the core, plugins/* and contrib/* need, with all their",
        "# extras (test, bench), at the newest versions when it ran: `make setup` installs exactly",
        "# these. Resolved on CPython "
        + " and ".join(version for version, _ in resolutions)
        + f" ({platform.system()}); a pin with a python_version marker",
        "# differs between them (or is needed by only some): each covers its resolved Python and",
        "# the versions up to the next one resolved.",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join([*header, *merged(resolutions)]) + "\n", encoding="utf-8")
    print(f"lock: wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
