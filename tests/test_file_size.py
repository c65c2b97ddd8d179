"""No source file grows past what a newcomer can read as one job: 900 lines.

A file that outgrows it is doing more than one job; split it by job (docs/architecture.md), not by
length.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import fdcore

REPO = Path(fdcore.__file__).parent.parent
MOST_LINES = 900


def tracked_python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in listed]


def test_the_repository_lists_its_python_files() -> None:
    files = tracked_python_files()
    assert REPO / "fdcore" / "abc.py" in files
    assert len(files) > 100


def test_no_source_file_is_over_900_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in tracked_python_files()
        if path.exists() and (lines := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert not long, f"over {MOST_LINES} lines: {long}"
