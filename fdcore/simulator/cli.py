"""``fdcore simulate``: seeded runs of real agents, their figures, and every invariant broken."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import attrs

from fdcore.errors import ConfigError
from fdcore.pricing import load_prices
from fdcore.settings.checks import Whole, add_flag
from fdcore.settings.declare import checks_of, help_of
from fdcore.simulator.options import add_options, scenario_from_args
from fdcore.simulator.report import Report
from fdcore.simulator.scenario import Scenario, option_of
from fdcore.simulator.simulation import keep_mailbox, simulate_world
from fdcore.terminal import Progress


def _simulate(args: argparse.Namespace) -> int:
    logger = logging.getLogger("fdcore")
    level = logger.level
    if not args.verbose:
        logger.setLevel(logging.ERROR)  # agents log every claim
    try:
        return _run(args)
    finally:
        logger.setLevel(level)  # as it was: a caller in the same process keeps its logging


def _run(args: argparse.Namespace) -> int:
    scenarios = [scenario_from_args(args, args.seed + n) for n in range(args.runs)]
    prices = load_prices(args.prices) if args.prices is not None else None
    if args.mailbox is not None and args.runs > 1:
        raise ConfigError(
            "fdcore simulate", "--mailbox", "keeps one run's mailbox: not with --runs"
        )
    reports = []
    progress = Progress()  # on a terminal only: piped output is the reports alone
    for n, scenario in enumerate(scenarios, 1):
        progress.update(f"simulating seed {scenario.seed} ({n} of {len(scenarios)})...")
        world, report = simulate_world(scenario)
        if args.mailbox is not None:
            keep_mailbox(world, args.mailbox)
        if prices is not None:
            report = attrs.evolve(report, prices=prices)
        progress.done()
        reports.append(report)
        if not args.json:
            print(report.text() if args.runs == 1 else _line(report))
    failed = [r.seed for r in reports if not r.ok]
    if args.json:
        data = [r.to_json() for r in reports]
        print(json.dumps(data[0] if args.runs == 1 else data, indent=2))
    elif args.runs > 1:
        total = sum(sum(r.requests.values()) for r in reports)
        wall = sum(r.wall_seconds for r in reports)
        print(
            f"{args.runs} runs, {total} requests, {wall:.1f} s wall "
            f"({total / wall if wall else 0:.0f} requests/s); "
            + (f"FAILED seeds: {' '.join(map(str, failed))}" if failed else "all invariants held")
        )
    return 1 if failed else 0


def _line(report: Report) -> str:
    states = ", ".join(f"{state} {n}" for state, n in report.requests.items())
    head = f"seed {report.seed}: {states}; stranded {report.stranded}"
    if report.ok:
        return f"{head}; ok"
    return "\n".join(
        [f"{head}; FAILED ({len(report.violations)} violations)"]
        + [
            f"  [{v.invariant}] t={v.time:.1f}s {v.message} (seed {report.seed})"
            for v in report.violations
        ]
        + [f"  reproduce: {report.command}"]
    )


class Simulate:
    """``fdcore simulate``, a command of the core's ``simulator`` plugin."""

    name = "simulate"
    help = "run real agents under a seeded simulator and check the invariants"
    description = (
        "Run N real agents against one in-memory store under virtual time, with seeded crashes, "
        "pauses, clock skew, store latency and store errors; print the figures and every "
        "invariant violation. Exits 1 if any invariant broke; the seed reproduces it."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        seed = attrs.fields(Scenario).seed
        add_flag(
            parser, option_of(seed), *checks_of(seed), default=seed.default, help=help_of(seed)
        )
        add_flag(
            parser, "--runs", Whole(1, 100_000), default=1, help="run this many seeds from --seed"
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument(
            "--prices",
            type=Path,
            metavar="FILE",
            help="a TOML file of store prices replacing the built-in ones (docs/operations.md)",
        )
        parser.add_argument(
            "--mailbox",
            type=Path,
            metavar="DIR",
            help="keep the run's mailbox in this new local folder (for fdcore cost, queue, ...)",
        )
        add_options(parser)

    def run(self, args: argparse.Namespace) -> int:
        return _simulate(args)
