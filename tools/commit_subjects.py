"""Commit subjects of at most 72 characters, the reasoning in the body after a blank line.

``commit_subjects.py message FILE``: the commit-msg hook's check (tools/git-hooks/commit-msg).
``commit_subjects.py since BASE``: ``make lint``'s check of every commit on the current branch
after BASE (merges included). Outside a git checkout it checks nothing; in a shallow clone that
does not reach BASE, it checks the commits there are.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

LIMIT = 72
ADVICE = f"at most {LIMIT} characters; the reasoning goes in the body, after a blank line"


def subject(message: str) -> str:
    """The subject as git shows it (``%s``): the first paragraph, its lines joined by spaces;
    comment lines are not part of the message."""
    kept = [line.strip() for line in message.splitlines() if not line.startswith("#")]
    text = "\n".join(kept).strip()
    return " ".join(text.split("\n\n")[0].split("\n"))


def check_message(path: Path) -> int:
    first = subject(path.read_text(encoding="utf-8", errors="replace"))
    if len(first) <= LIMIT:
        return 0
    print(f"commit-msg: the subject is {len(first)} characters, {ADVICE}:\n  {first}")
    return 1


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False)


def check_since(base: str) -> int:
    if git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        print("commit subjects: not a git checkout, nothing to check")
        return 0
    if git("cat-file", "-e", f"{base}^{{commit}}").returncode == 0:
        span, where = f"{base}..HEAD", f"after {base}"
    elif git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        span, where = "HEAD", f"in this shallow clone ({base} is not in it)"
    else:
        print(f"commit subjects: the base commit {base} is not in this repository's history")
        return 1
    listed = git("log", "--format=%h %s", span)
    if listed.returncode != 0:
        print(f"commit subjects: git log {span} failed: {listed.stderr.strip()}")
        return 1
    lines = listed.stdout.splitlines()
    long = [line for line in lines if len(line.partition(" ")[2]) > LIMIT]
    for line in long:
        commit, _, text = line.partition(" ")
        print(f"commit subjects: {commit}'s subject is {len(text)} characters: {text}")
    if long:
        print(f"commit subjects: {len(long)} of {len(lines)} commits {where}: {ADVICE}")
        return 1
    return 0


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "message":
        return check_message(Path(argv[1]))
    if len(argv) == 2 and argv[0] == "since":
        return check_since(argv[1])
    print("usage: commit_subjects.py message FILE | since BASE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
