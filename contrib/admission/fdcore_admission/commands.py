"""``fdcore admission serve | status``: run a host's dispatcher, or show what waits in it."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

import attrs

from fdcore.errors import ConfigError
from fdcore_admission.queue import Queue
from fdcore_admission.wire import run_dispatcher

HOST_VARIABLE = "FDCORE_HOST"


class AdmissionCommand:
    name = "admission"
    help = "run the host's admission dispatcher, or show the lanes waiting in it"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="admission_action", required=True, metavar="ACTION")
        for action, text in (
            ("serve", "hold queued lanes and hand them over on the host's socket until killed"),
            ("status", "list the queued rows and their status entries"),
        ):
            sub = actions.add_parser(action, help=text, description=text)
            sub.add_argument(
                "--host", default=None, help=f"the host folder (default: ${HOST_VARIABLE})"
            )
            if action == "status":
                sub.add_argument("--json", action="store_true", help="one JSON object")

    def run(self, args: argparse.Namespace) -> int:
        folder = args.host or os.environ.get(HOST_VARIABLE)
        if not folder:
            where = f"fdcore admission {args.admission_action}"
            raise ConfigError(where, "--host", f"missing (or set ${HOST_VARIABLE})")
        if args.admission_action == "serve":
            run_dispatcher(folder)
            return 0
        return _status(Path(folder), as_json=args.json)


def _status(folder: Path, *, as_json: bool) -> int:
    if not (folder / "queue.sqlite").exists():
        rows = []
    else:
        try:
            queue = Queue(folder, read_only=True)
            rows = queue.rows()
            queue.close()
        except sqlite3.Error as exc:
            raise ConfigError(str(folder / "queue.sqlite"), None, f"unreadable: {exc}") from None
    if as_json:
        print(json.dumps({"rows": [attrs.asdict(row) for row in rows]}))
        return 0
    for row in rows:
        print(f"{row.lane} {row.stage} priority {row.priority} queued_at {row.queued_at:.3f}")
    return 0
