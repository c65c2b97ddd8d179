"""``fdcore simulate``: seeded runs of real agents, their figures, and every invariant broken."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from typing import Any

import attrs

from fdcore.errors import ConfigError
from fdcore.simulator.scenario import Scenario

# option -> (Scenario field, type, help); every Scenario field but seed and take_over.
_OPTIONS: tuple[tuple[str, str, type, str], ...] = (
    ("--agents", "agents", int, "agents in the fleet"),
    ("--requests", "requests", int, "requests submitted"),
    ("--claim", "claim", str, "claim policy: always or when_free"),
    ("--concurrency", "concurrency", int, "workers per agent"),
    ("--poll-seconds", "poll_seconds", float, "seconds between an agent's polls"),
    ("--poll-jitter", "poll_jitter", float, "poll interval spread, a share of poll-seconds"),
    ("--stale-after", "stale_after", float, "an agent's record is stale after this"),
    ("--grace", "grace_seconds", float, "seconds past stale-after before an agent is lost"),
    ("--max-attempts", "max_attempts", int, "lost attempts before a request fails"),
    ("--table-pool", "table_pool", int, "distinct table names (shared tables contend)"),
    ("--max-tables", "max_tables", int, "each request names 1..this many tables"),
    ("--table-median", "table_median", float, "median table run, seconds (lognormal)"),
    ("--table-sigma", "table_sigma", float, "spread of table runs (lognormal sigma)"),
    ("--arrival", "arrival", str, "poisson (over time) or all (at once)"),
    ("--load", "load", float, "offered work as a share of the fleet's workers"),
    ("--poison", "poison", int, "requests that crash whichever agent runs them"),
    ("--crash-rate", "crash_rate", float, "crashes per agent per virtual hour"),
    ("--restart-after", "restart_after", float, "longest crash-to-restart delay, seconds"),
    ("--pause-rate", "pause_rate", float, "pauses per agent per virtual hour"),
    ("--pause-max", "pause_max", float, "longest pause, seconds"),
    ("--skew", "skew", float, "each agent's clock is off by up to +-this many seconds"),
    ("--latency", "latency", float, "mean seconds per store operation"),
    ("--error-rate", "error_rate", float, "chance a store operation fails transiently"),
    ("--ambiguous", "ambiguous", float, "share of failed writes that applied anyway"),
    ("--max-hours", "max_hours", float, "virtual time limit, hours"),
    (
        "--archive-after",
        "archive_after",
        float,
        "finished requests leave the mailbox after (0: never)",
    ),
    ("--schedule-hours", "schedule_hours", float, "the schedules' slots are judged over this"),
)


def _agent_skew(text: str) -> tuple[str, float]:
    name, _equals, value = text.partition("=")
    try:
        return name, float(value)
    except ValueError:
        raise ConfigError(
            "fdcore simulate",
            "--agent-skew",
            f"expected NAME=SECONDS (e.g. agent-1=-30), got {text!r}",
        ) from None


def _show_agent_skew(value: tuple[str, float]) -> str:
    return f"{value[0]}={value[1]!r}"


# Repeatable options: (option, Scenario field, how one is read, help, how one is written)
_REPEATED: tuple[tuple[str, str, Any, str, Any], ...] = (
    ("--schedule", "schedules", str, "a schedule every agent shares, e.g. every=1h", str),
    (
        "--unshared-schedule",
        "unshared_schedules",
        str,
        "a schedule of agent-1 alone, e.g. every=30m",
        str,
    ),
    (
        "--agent-skew",
        "agent_skews",
        _agent_skew,
        "NAME=SECONDS: that agent's clock skew, instead of one drawn from --skew",
        _show_agent_skew,
    ),
)


def scenario_from_args(args: argparse.Namespace, seed: int) -> Scenario:
    values: dict[str, Any] = {"seed": seed, "take_over": args.take_over}
    for _option, field, _type, _help in _OPTIONS:
        value = getattr(args, field)
        if value is not None:
            values[field] = value
    for _option, field, read, _help, _show in _REPEATED:
        values[field] = tuple(read(text) for text in getattr(args, field) or ())
    return Scenario(**values)


def command_line(scenario: Scenario) -> str:
    """The ``fdcore simulate`` command that runs ``scenario`` again (options off their defaults)."""
    defaults = Scenario()
    words = ["fdcore", "simulate", "--seed", str(scenario.seed)]
    if scenario.take_over:
        words.append("--take-over")
    for option, field, _type, _help in _OPTIONS:
        value = getattr(scenario, field)
        if value != getattr(defaults, field):
            words += [option, repr(value) if isinstance(value, float) else str(value)]
    for option, field, _type, _help, show in _REPEATED:
        for value in getattr(scenario, field):
            words += [option, show(value)]
    return shlex.join(words)


def _simulate(args: argparse.Namespace) -> int:
    from fdcore.simulator import simulate

    if args.runs < 1:
        raise ConfigError("fdcore simulate", "--runs", f"must be >= 1, got {args.runs}")
    if not args.verbose:
        logging.getLogger("fdcore").setLevel(logging.ERROR)  # agents log every claim
    scenarios = [scenario_from_args(args, args.seed + n) for n in range(args.runs)]
    reports = []
    for scenario in scenarios:
        report = simulate(scenario)
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


def _line(report: Any) -> str:
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


def register(commands: Any) -> None:
    defaults = Scenario()
    parser = commands.add_parser(
        "simulate",
        help="run real agents under a seeded simulator and check the invariants",
        description="Run N real agents against one in-memory store under virtual time, with "
        "seeded crashes, pauses, clock skew, store latency and store errors; print the figures "
        "and every invariant violation. Exits 1 if any invariant broke; the seed reproduces it.",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the (first) run")
    parser.add_argument("--runs", type=int, default=1, help="run this many seeds from --seed")
    parser.add_argument(
        "--take-over", action="store_true", help="agents take over lost agents' requests"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    for option, field, kind, text in _OPTIONS:
        default = getattr(defaults, field)
        shown = "derived" if default is None else default
        parser.add_argument(option, dest=field, type=kind, default=None, help=f"{text} ({shown})")
    for option, field, _read, text, _show in _REPEATED:
        parser.add_argument(option, dest=field, action="append", help=f"{text} (repeatable)")
    parser.set_defaults(run=_simulate)


assert {field for _o, field, _t, _h in _OPTIONS} | {f for _o, f, _t, _h, _s in _REPEATED} | {
    "seed",
    "take_over",
} == {a.name for a in attrs.fields(Scenario)}, "every Scenario field needs a command-line option"
