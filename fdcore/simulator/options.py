"""A scenario on the command line: the ``fdcore simulate`` options, read into a
:class:`~fdcore.simulator.scenario.Scenario` and written back as the command that runs it again."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

import attrs

from fdcore.errors import ConfigError
from fdcore.simulator.scenario import Scenario

# option -> (Scenario field, type, help); every Scenario field but seed and take_over.
_OPTIONS: tuple[tuple[str, str, type, str], ...] = (
    ("--agents", "agents", int, "agents in the fleet"),
    ("--requests", "requests", int, "requests submitted"),
    ("--claim", "claim", str, "claim policy: always, when_free or one a plugin adds"),
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
    ("--arrival", "arrival", str, "poisson (over time), bursty (in bursts) or all (at once)"),
    ("--load", "load", float, "offered work as a share of the fleet's workers"),
    ("--burst", "burst", int, "requests per burst (--arrival bursty)"),
    ("--poison", "poison", int, "requests that crash whichever agent runs them"),
    ("--cancel", "cancel", float, "share of requests an operator cancels (fdcore cancel)"),
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
    (
        "--retention-keep",
        "retention_keep",
        float,
        "agents archive finished requests after this, the product's retention (0: off)",
    ),
    (
        "--retention-runs",
        "retention_runs",
        float,
        "a retention run process starts this long after the last ended (0: none)",
    ),
    (
        "--retention-runs-keep",
        "retention_runs_keep",
        float,
        "the --keep of those runs, seconds",
    ),
    ("--schedule-hours", "schedule_hours", float, "the schedules' slots are judged over this"),
)


def _per_agent(option: str, kind: type, example: str) -> Any:
    """A reader of ``NAME=VALUE`` for ``option``; a one-line ConfigError naming it otherwise."""

    def read(text: str) -> tuple[str, Any]:
        name, _equals, value = text.partition("=")
        try:
            return name, kind(value)
        except ValueError:
            raise ConfigError(
                "fdcore simulate", option, f"expected {example}, got {text!r}"
            ) from None

    return read


def _show_per_agent(value: tuple[str, Any]) -> str:
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
        _per_agent("--agent-skew", float, "NAME=SECONDS (e.g. agent-1=-30)"),
        "NAME=SECONDS: that agent's clock skew, instead of one drawn from --skew",
        _show_per_agent,
    ),
    (
        "--agent-speed",
        "agent_speeds",
        _per_agent("--agent-speed", float, "NAME=FACTOR (e.g. agent-1=0.5)"),
        "NAME=FACTOR: that agent runs its tables FACTOR times as fast",
        _show_per_agent,
    ),
    (
        "--agent-concurrency",
        "agent_concurrency",
        _per_agent("--agent-concurrency", int, "NAME=WORKERS (e.g. agent-1=8)"),
        "NAME=WORKERS: that agent's workers, instead of --concurrency",
        _show_per_agent,
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


def add_options(parser: argparse.ArgumentParser) -> None:
    """The scenario's options but ``--seed`` and ``--take-over``, each with its default."""
    defaults = Scenario()
    for option, field, kind, text in _OPTIONS:
        default = getattr(defaults, field)
        shown = "derived" if default is None else default
        parser.add_argument(option, dest=field, type=kind, default=None, help=f"{text} ({shown})")
    for option, field, _read, text, _show in _REPEATED:
        parser.add_argument(option, dest=field, action="append", help=f"{text} (repeatable)")


assert {field for _o, field, _t, _h in _OPTIONS} | {f for _o, f, _t, _h, _s in _REPEATED} | {
    "seed",
    "take_over",
} == {a.name for a in attrs.fields(Scenario)}, "every Scenario field needs a command-line option"
