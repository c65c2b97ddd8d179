"""Shared setup for the tests that run real ``fdcore agent run`` processes on a local folder."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from fdcore.cli.fleet import AgentFleet
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins

SUPPORT = Path(__file__).parent / "support"


def local_fleet(tmp_path: Path) -> tuple[AgentFleet, Mailbox]:
    """Agents on a fresh local-folder environment under ``tmp_path``."""
    return fleet_on(tmp_path, (tmp_path / "env").as_uri())


def fleet_on(
    tmp_path: Path, environment: str, storage: dict[str, str] | None = None
) -> tuple[AgentFleet, Mailbox]:
    """Agents on ``environment``; ``storage`` options reach agents and table runners alike.

    The test table runners (tests/support) log every table write under ``tmp_path``.
    """
    logs = tmp_path / "table-log"
    logs.mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT), env.get("PYTHONPATH")]))
    env["FDCORE_TEST_LOG"] = str(logs)
    env["FDCORE_TEST_STORAGE_OPTIONS"] = json.dumps(storage or {})
    fleet = AgentFleet(tmp_path, environment, env)
    return fleet, Mailbox(load_plugins().open_storage(environment, storage))


def table_writes(tmp_path: Path) -> list[dict[str, Any]]:
    writes = []
    for path in sorted((tmp_path / "table-log").glob("*.jsonl")):
        writes.extend(json.loads(line) for line in path.read_text().splitlines())
    return writes


def double_writers(writes: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of accepted writes to one table whose time spans overlap under different tokens."""
    by_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for write in writes:
        if not write.get("rejected") and not write.get("killed"):
            by_table[write["table"]].append(write)
    overlaps = []
    for spans in by_table.values():
        spans.sort(key=lambda w: w["start"])
        longest = spans[0]  # of the spans so far, the one that ends last
        for span in spans[1:]:
            if span["start"] < longest["end"] and span["token"] != longest["token"]:
                overlaps.append((longest, span))
            if span["end"] > longest["end"]:
                longest = span
    return overlaps
