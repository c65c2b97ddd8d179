"""``fdcore admission serve | status``: run a host's dispatcher, or show what waits in it and how
long the last claims waited (queue wait and admission to claim, kept apart)."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

import attrs

from fdcore.errors import ConfigError
from fdcore_admission.queue import Claim, Queue
from fdcore_admission.wire import run_dispatcher

HOST_VARIABLE = "FDCORE_HOST"


class AdmissionCommand:
    name = "admission"
    help = "run the host's admission dispatcher, or show the lanes waiting in it"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="admission_action", required=True, metavar="ACTION")
        for action, text in (
            ("serve", "hold queued lanes and hand them over on the host's socket until killed"),
            ("status", "list the queued rows, and the timings of the last claims"),
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
    rows, claims = [], []
    if (folder / "queue.sqlite").exists():
        try:
            queue = Queue(folder, read_only=True)
            rows, claims = queue.rows(), queue.claims()
            queue.close()
        except sqlite3.Error as exc:
            raise ConfigError(str(folder / "queue.sqlite"), None, f"unreadable: {exc}") from None
    measures = {name: _measure([getattr(c, name) for c in claims]) for name in MEASURES}
    if as_json:
        document = {
            "rows": [attrs.asdict(row) for row in rows],
            "claims": [_claim_doc(claim) for claim in claims],
            "measures": measures,
        }
        print(json.dumps(document))
        return 0
    for row in rows:
        print(f"{row.lane} {row.stage} priority {row.priority} queued_at {row.queued_at:.3f}")
    for name, measure in measures.items():
        if measure["count"]:
            print(
                f"{name}: {measure['count']} claim(s), mean {measure['mean']:.3f} s, "
                f"max {measure['max']:.3f} s"
            )
    return 0


#: The two timings of a claim, kept apart: queued -> admitted, and admitted -> claimed.
MEASURES = ("queue_wait", "admission_to_claim")


def _measure(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"count": 0, "mean": None, "max": None}
    return {"count": len(values), "mean": sum(values) / len(values), "max": max(values)}


def _claim_doc(claim: Claim) -> dict[str, object]:
    return {**attrs.asdict(claim), **{name: getattr(claim, name) for name in MEASURES}}
