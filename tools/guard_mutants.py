"""Remove each guard of hostslots and admission in turn and check that a test fails.

``make guard-mutants`` (or ``.venv/bin/python tools/guard_mutants.py [NAME...]``): for each
mutant (or those whose name contains a NAME), copy the plugin's package to a temporary folder,
replace the guard's code in the copy, run the package's tests (not the slow ones) with the copy
first on ``PYTHONPATH``, and print CAUGHT (a test failed) or MISSED. Exit 1 if any MISSED. The
checkout is never edited, so an interrupted run leaves nothing behind. The fleet test's guard
(the agent's host gate) is checked by hand: see docs/host.md, "Measured".
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
H = "plugins/hostslots/fdcore_hostslots/host.py"
D = "plugins/admission/fdcore_admission/dispatcher.py"
E = "plugins/admission/fdcore_admission/environment.py"
HT = "plugins/hostslots/tests"
AT = "plugins/admission/tests"
MUTANTS = [
    ("token check", D, "if not isinstance(token, str) or token != row.token:", "if False:", AT),
    (
        "expiry boundary (> to >=)",
        D,
        "now - row.starting_at > START_TIMEOUT",
        "now - row.starting_at >= START_TIMEOUT",
        AT,
    ),
    ("secret filter", E, " or any(word in name.upper() for word in SECRET_WORDS)", "", AT),
    (
        "value length boundary (>= to >)",
        E,
        "len(value) >= MAX_VALUE_CHARS",
        "len(value) > MAX_VALUE_CHARS",
        AT,
    ),
    (
        "enqueue refusal closes descriptors",
        D,
        "                    os.close(fd)\n            raise",
        "                    pass\n            raise",
        AT,
    ),
    ("shrink refusal", H, "            if above:", "            if False:", HT),
    ("scope conflict", H, 'if other.scope == "task" and other.table == table:', "if False:", HT),
    (
        "fail-closed capacity (range check)",
        H,
        "if type(value) is not int or not 1 <= value <= MAX_SLOTS:",
        "if type(value) is not int:",
        HT,
    ),
    (
        "fail-closed capacity (missing = 1)",
        H,
        'data = self._read("capacity.json", CapacityInvalid)',
        'data = self._read_optional("capacity.json", CapacityInvalid) or {"slot_count": 1}',
        HT,
    ),
    (
        "outdated layout",
        H,
        "if type(version) is int and version < LAYOUT_VERSION:",
        "if False:",
        HT,
    ),
    (
        "rollback to an older release",
        H,
        "if type(version) is int and version > LAYOUT_VERSION:",
        "if False:",
        HT,
    ),
    ("generation fence", H, "        if issued > lease.generation:", "        if False:", HT),
    (
        "slot id canonical check",
        H,
        "if not entry.is_dir() or not SLOT_NAME.fullmatch(entry.name):",
        "if not entry.is_dir():",
        HT,
    ),
    (
        "live lease above count",
        H,
        "            if slot >= count:\n                raise",
        "            if False:\n                raise",
        HT,
    ),
    (
        "holder alive keeps lease",
        H,
        "return not lease.expired(now) or self.alive(lease.process) is True",
        "return not lease.expired(now)",
        HT,
    ),
    (
        "migrate drain",
        H,
        "                if live:\n                    raise DrainRequired",
        "                if False:\n                    raise DrainRequired",
        HT,
    ),
    (
        "migrate residue",
        H,
        "                self._write(RESIDUE, residue)",
        "                pass",
        HT,
    ),
]


def run_mutant(path: str, old: str, new: str, tests: str) -> subprocess.CompletedProcess[str]:
    """Run ``tests`` against a copy of ``path``'s package in which ``old`` reads ``new``."""
    package = (ROOT / path).parent
    with tempfile.TemporaryDirectory(prefix="fdcore-mutant-") as folder:
        copy = pathlib.Path(folder) / package.name
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
        target = copy / (ROOT / path).relative_to(package)
        target.write_text(target.read_text().replace(old, new))
        environ = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([folder, os.environ.get("PYTHONPATH", "")]),
        }
        python = str(ROOT / ".venv/bin/python")
        where = subprocess.run(
            [python, "-c", f"import {package.name}; print({package.name}.__file__)"],
            env=environ,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not where.startswith(folder):
            raise SystemExit(f"{package.name} imports from {where}, not the mutated copy")
        command = [python, "-m", "pytest", "-q", "-x", tests, "-m", "not slow"]
        return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True)


def main(only: list[str]) -> int:
    missed = 0
    for name, path, old, new, tests in MUTANTS:
        if only and not any(word in name for word in only):
            continue
        if (ROOT / path).read_text().count(old) != 1:
            raise SystemExit(f"{name}: the guard's code is not found once in {path}; update me")
        run = run_mutant(path, old, new, tests)
        lines = run.stdout.strip().splitlines()
        missed += run.returncode == 0
        print(f"{'CAUGHT' if run.returncode else 'MISSED'}  {name}: {lines[-1] if lines else ''}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
