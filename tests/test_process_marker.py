"""Every test module that calls a helper starting real processes carries the ``processes``
marker, so conftest.py runs its tests one after the other on one worker. (Fixtures that start
processes are checked by conftest.py itself, from each test's fixtures.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
#: Names only a module that starts or races processes uses: the fleet and agent helpers, the
#: emulators, subprocess.Popen, the browser driver, the storage suite's process races, and the
#: doctor command (its probes race processes).
HELPERS = re.compile(
    r"\b(AgentFleet|AgentProcess|Popen|Azurite|S3Emulator|sync_playwright)\b"
    r'|multiprocess = True|"doctor"'
)
MARKED = re.compile(r"pytest\.mark\.processes\b")


def _modules(roots: tuple[str, ...] = ("tests", "plugins", "contrib")) -> list[Path]:
    return [
        path
        for root in roots
        for path in sorted((ROOT / root).rglob("test_*.py"))
        if path != Path(__file__)
    ]


def test_every_module_calling_a_process_helper_is_marked() -> None:
    unmarked = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if HELPERS.search(text := path.read_text(encoding="utf-8")) and not MARKED.search(text)
    ]
    assert unmarked == [], f"add pytestmark = pytest.mark.processes to: {', '.join(unmarked)}"


def test_the_check_sees_the_modules() -> None:
    modules = _modules()
    assert Path(ROOT / "tests" / "test_processes_takeover.py") in modules
    assert sum(bool(MARKED.search(path.read_text(encoding="utf-8"))) for path in modules) > 40
