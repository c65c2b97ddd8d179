"""Every ``pip install`` the README and the guides show installs folders of this checkout (the
core, a plugin, a contrib extra), each a distribution: none names a distribution that is not
published. tests/test_wheels.py runs the README's quick start, install line included."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PAGES += sorted(REPO.glob("plugins/*/README.md")) + sorted(REPO.glob("contrib/*/README.md"))
#: ``pip install ARGS``, in a code block or in backticks, up to a comment or a closing backtick
INSTALL = re.compile(r"pip install ([^`#\n]+)")


#: pip's options whose value is not a distribution (a constraints file, an index...)
TAKES_A_FILE = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "-f"}


def installed(arguments: str) -> list[str]:
    """What ``pip install ARGUMENTS`` installs: its arguments less options and their values."""
    words, skip = [], False
    for word in shlex.split(arguments):
        if not skip and not word.startswith("-"):
            words.append(word)
        skip = word in TAKES_A_FILE
    return words


def install_lines() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for match in INSTALL.finditer(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(REPO)}: pip install {match[1].strip()}"
            found.append((where, installed(match[1])))
    return found


def test_every_install_line_names_folders_of_this_checkout() -> None:
    lines = install_lines()
    assert any("plugins/localfs" in words for _, words in lines)  # the README's, at least
    wrong = [
        f"{where} ({word})"
        for where, words in lines
        for word in words
        if not (REPO / word.split("[")[0] / "pyproject.toml").is_file()
    ]
    assert not wrong, "install lines naming no folder of this checkout: " + "; ".join(wrong)
