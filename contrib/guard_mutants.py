"""Remove each guard of hostslots and admission in turn and check that a test fails.

``.venv/bin/python contrib/guard_mutants.py [NAME...]``: for each mutant (or those whose name
contains a NAME), replace the guard's code in the checkout, run the package's tests (not the
slow ones), restore the file, and print CAUGHT (a test failed) or MISSED. Exit 1 if any MISSED.
The fleet test's guard (the agent's host gate) is checked by hand: see docs/host.md, "Measured".
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
H = "contrib/hostslots/fdcore_hostslots/host.py"
D = "contrib/admission/fdcore_admission/dispatcher.py"
E = "contrib/admission/fdcore_admission/environment.py"
HT = "contrib/hostslots/tests"
AT = "contrib/admission/tests"
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


def main(only: list[str]) -> int:
    missed = 0
    for name, path, old, new, tests in MUTANTS:
        if only and not any(word in name for word in only):
            continue
        file = ROOT / path
        text = file.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{name}: the guard's code is not found once in {path}; update me")
        file.write_text(text.replace(old, new))
        try:
            command = [str(ROOT / ".venv/bin/pytest"), "-q", "-x", tests, "-m", "not slow"]
            run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        finally:
            file.write_text(text)
        lines = run.stdout.strip().splitlines()
        missed += run.returncode == 0
        print(f"{'CAUGHT' if run.returncode else 'MISSED'}  {name}: {lines[-1] if lines else ''}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
