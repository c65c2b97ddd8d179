"""A scenario on the command line: the ``fdcore simulate`` options, read into a
:class:`~fdcore.simulator.scenario.Scenario` and written back as the command that runs it again."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

import attrs

from fdcore.durations import Number, Reader, Seconds, Whole, add_flag
from fdcore.errors import ConfigError
from fdcore.simulator.scenario import Scenario, option_of, scenario_of

DAY = 86400.0


def _option(field: str) -> str:
    return option_of(attrs.fields_dict(Scenario)[field])


# (Scenario field, reader, help); every Scenario field but seed and take_over (each field names
# its option). Each number is read by the one reader of numbers (fdcore.durations), within what
# a run can mean.
_OPTIONS: tuple[tuple[str, Any, str], ...] = (
    ("agents", Whole(1, 1000), "agents in the fleet"),
    ("requests", Whole(0, 10_000_000), "requests submitted"),
    ("claim", str, "claim policy: always, when_free or one a plugin adds"),
    ("concurrency", Whole(1, 1024), "workers per agent"),
    ("poll_seconds", Seconds(), "seconds between an agent's polls"),
    (
        "poll_jitter",
        Number(0, 0.5),
        "poll interval spread, a share of poll-seconds",
    ),
    ("stale_after", Seconds(), "an agent's record is stale after this"),
    (
        "grace_seconds",
        Seconds(zero_allowed=True),
        "seconds past stale-after before an agent is lost",
    ),
    ("max_attempts", Whole(1, 1000), "lost attempts before a request fails"),
    (
        "table_pool",
        Whole(1, 1_000_000),
        "distinct table names (shared tables contend)",
    ),
    ("max_tables", Whole(1, 10_000), "each request names 1..this many tables"),
    ("table_median", Seconds(), "median table run, seconds (lognormal)"),
    ("table_sigma", Number(0, 10), "spread of table runs (lognormal sigma)"),
    ("arrival", str, "poisson (over time), bursty (in bursts) or all (at once)"),
    ("load", Number(0.001, 1000), "offered work as a share of the fleet's workers"),
    ("burst", Whole(1, 10_000_000), "requests per burst (--arrival bursty)"),
    ("poison", Whole(0, 1_000_000), "requests that crash whichever agent runs them"),
    ("cancel", Number(0, 1), "share of requests an operator cancels (fdcore cancel)"),
    ("crash_rate", Number(0, 3600), "crashes per agent per virtual hour"),
    ("restart_after", Seconds(), "longest crash-to-restart delay, seconds"),
    ("pause_rate", Number(0, 3600), "pauses per agent per virtual hour"),
    ("pause_max", Seconds(), "longest pause, seconds"),
    ("starve_rate", Number(0, 3600), "spells of CPU starvation per agent per virtual hour"),
    ("starve_max", Seconds(), "longest spell of CPU starvation, seconds"),
    ("starve_step", Seconds(), "longest wait of one step in a spell, seconds"),
    (
        "skew",
        Seconds(zero_allowed=True, maximum=DAY),
        "each agent's clock is off by up to +-this many seconds",
    ),
    ("latency", Seconds(zero_allowed=True), "mean seconds per store operation"),
    ("error_rate", Number(0, 0.5), "chance a store operation fails transiently"),
    ("ambiguous", Number(0, 1), "share of failed writes that applied anyway"),
    ("max_hours", Number(0.001, 24 * 366), "virtual time limit, hours"),
    (
        "archive_after",
        Seconds(zero_allowed=True),
        "finished requests leave the mailbox after (0: never)",
    ),
    (
        "retention_keep",
        Seconds(zero_allowed=True),
        "agents archive finished requests after this, the product's retention (0: off)",
    ),
    (
        "retention_runs",
        Seconds(zero_allowed=True),
        "a retention run process starts this long after the last ended (0: none)",
    ),
    (
        "retention_runs_keep",
        Seconds(),
        "the --keep of those runs, seconds",
    ),
    (
        "schedule_hours",
        Number(0.001, 24 * 366),
        "the schedules' slots are judged over this",
    ),
)


def _per_agent(field: str, kind: type, example: str) -> Any:
    """A reader of ``NAME=VALUE`` for ``field``; a one-line ConfigError naming its option else."""
    option = _option(field)

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


# Repeatable options: (Scenario field, how one is read, help, how one is written)
_REPEATED: tuple[tuple[str, Any, str, Any], ...] = (
    ("schedules", str, "a schedule every agent shares, e.g. every=1h", str),
    (
        "unshared_schedules",
        str,
        "a schedule of agent-1 alone, e.g. every=30m",
        str,
    ),
    (
        "agent_skews",
        _per_agent("agent_skews", float, "NAME=SECONDS (e.g. agent-1=-30)"),
        "NAME=SECONDS: that agent's clock skew, instead of one drawn from --skew",
        _show_per_agent,
    ),
    (
        "agent_speeds",
        _per_agent("agent_speeds", float, "NAME=FACTOR (e.g. agent-1=0.5)"),
        "NAME=FACTOR: that agent runs its tables FACTOR times as fast",
        _show_per_agent,
    ),
    (
        "agent_concurrency",
        _per_agent("agent_concurrency", int, "NAME=WORKERS (e.g. agent-1=8)"),
        "NAME=WORKERS: that agent's workers, instead of --concurrency",
        _show_per_agent,
    ),
)


def scenario_from_args(args: argparse.Namespace, seed: int) -> Scenario:
    values: dict[str, Any] = {"seed": seed, "take_over": args.take_over}
    for field, _type, _help in _OPTIONS:
        value = getattr(args, field)
        if value is not None:
            values[field] = value
    for field, read, _help, _show in _REPEATED:
        values[field] = tuple(read(text) for text in getattr(args, field) or ())
    return scenario_of(values)


def command_line(scenario: Scenario) -> str:
    """The ``fdcore simulate`` command that runs ``scenario`` again (options off their defaults)."""
    defaults = Scenario()
    words = ["fdcore", "simulate", "--seed", str(scenario.seed)]
    if scenario.take_over:
        words.append("--take-over")
    for field, _type, _help in _OPTIONS:
        value = getattr(scenario, field)
        if value != getattr(defaults, field):
            words += [_option(field), repr(value) if isinstance(value, float) else str(value)]
    for field, _type, _help, show in _REPEATED:
        for value in getattr(scenario, field):
            words += [_option(field), show(value)]
    return shlex.join(words)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The scenario's options but ``--seed`` and ``--take-over``, each with its default."""
    defaults = Scenario()
    for field, kind, text in _OPTIONS:
        option = _option(field)
        default = getattr(defaults, field)
        shown = "derived" if default is None else default
        if isinstance(kind, Reader):
            add_flag(parser, option, kind, dest=field, default=None, help=f"{text} ({shown})")
        else:
            parser.add_argument(option, dest=field, default=None, help=f"{text} ({shown})")
    for field, _read, text, _show in _REPEATED:
        parser.add_argument(
            _option(field), dest=field, action="append", help=f"{text} (repeatable)"
        )


assert {field for field, _t, _h in _OPTIONS} | {field for field, _r, _h, _s in _REPEATED} | {
    "seed",
    "take_over",
} == {a.name for a in attrs.fields(Scenario)}, "every Scenario field needs a command-line option"
