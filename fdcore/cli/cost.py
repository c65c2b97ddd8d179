"""``fdcore cost``: what the table runs cost, by run, request, schedule, owner or agent."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from fdcore.cli.audit import since_flag
from fdcore.cli.config import add_environment_flags
from fdcore.cli.output import format_table
from fdcore.environment import COST_GROUPS, CostReport, CostRow, Environment
from fdcore.pricing import KINDS, PRICES, load_prices

#: The columns of ``--csv``, one line per row of the report.
CSV_COLUMNS = (
    "key",
    "runs",
    "seconds",
    *KINDS,
    "operations",
    "uncounted_runs",
    "store_dollars",
    "compute_dollars",
    "dollars",
)


def _csv_line(row: CostRow) -> list[str]:
    return [
        row.key,
        str(row.runs),
        f"{row.seconds:.3f}",
        *(str(row.operations.get(kind, 0)) for kind in KINDS),
        str(row.total_operations),
        str(row.uncounted),
        f"{row.store_dollars:.6f}",
        f"{row.compute_dollars:.6f}",
        f"{row.dollars:.6f}",
    ]


def _text(report: CostReport) -> str:
    head = (report.by.upper(), "RUNS", "HOURS", "OPERATIONS", "STORE $", "COMPUTE $", "TOTAL $")
    lines: list[tuple[str, ...]] = [head]
    for row in [*report.rows, report.total]:
        lines.append(
            (
                row.key,
                str(row.runs),
                f"{row.seconds / 3600:.2f}",
                str(row.total_operations),
                f"{row.store_dollars:.4f}",
                f"{row.compute_dollars:.4f}",
                f"{row.dollars:.4f}",
            )
        )
    notes = [
        f"store operations at {report.store} prices"
        if report.store
        else "store operations not priced (a local folder): --store prices them as on one"
    ]
    if report.since is not None:
        notes.append("runs ended since then; what no run made is counted from the agents' start")
    if report.total.uncounted:
        notes.append(f"{report.total.uncounted} runs by older agents count no operations")
    return format_table(lines) + "\n(" + "; ".join(notes) + ")"


class Cost:
    name = "cost"
    help = "what the table runs cost: store operations and compute, by run, request, ..."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_environment_flags(parser)
        parser.add_argument(
            "--by", choices=COST_GROUPS, default="request", help="group runs by (default: request)"
        )
        parser.add_argument(
            "--since",
            type=since_flag("fdcore cost"),
            help="runs ended from this ISO 8601 time, or this long ago (1h, 7d)",
        )
        parser.add_argument(
            "--store",
            choices=tuple(PRICES),
            help="whose prices (default: the store the environment's URL names)",
        )
        parser.add_argument(
            "--prices",
            type=Path,
            metavar="FILE",
            help="a TOML file of store prices replacing the built-in ones (docs/operations.md)",
        )
        shown = parser.add_mutually_exclusive_group()
        shown.add_argument("--json", action="store_true", help="machine-readable output")
        shown.add_argument("--csv", action="store_true", help="one CSV line per row")

    def run(self, args: argparse.Namespace) -> int:
        prices = load_prices(args.prices) if args.prices is not None else None
        with Environment.open(args.env) as environment:
            report = environment.cost(by=args.by, since=args.since, store=args.store, prices=prices)
        if args.json:
            print(json.dumps(report.to_json(), indent=2))
        elif args.csv:
            out = csv.writer(sys.stdout, lineterminator="\n")
            out.writerow(CSV_COLUMNS)
            out.writerows(_csv_line(row) for row in report.rows)
        else:
            print(_text(report))
        return 0
