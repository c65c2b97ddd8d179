"""A scenario on the command line: ``fdcore simulate``'s flags, made from the
:class:`~fdcore.simulator.scenario.Scenario` declaration (each field's flag, default, check and
help), read back into a Scenario, and written as the command that runs it again."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

import attrs

from fdcore.settings.checks import Check, PerName, add_flag
from fdcore.settings.declare import checks_of, help_of
from fdcore.simulator.scenario import Scenario, option_of, scenario_of


def _fields() -> list[attrs.Attribute[Any]]:
    """The fields a flag sets: all but the seed, which ``--seed`` and ``--runs`` set together;
    switches first, then values, then repeated flags (the order a command is written in)."""
    fields = [field for field in attrs.fields(Scenario) if field.name != "seed"]
    return sorted(fields, key=lambda field: (not _switch(field), _repeated(field)))


def _switch(field: attrs.Attribute[Any]) -> bool:
    return isinstance(field.default, bool)


def _repeated(field: attrs.Attribute[Any]) -> bool:
    return isinstance(field.default, tuple)


def _check(field: attrs.Attribute[Any]) -> Check | None:
    """The field's value check (not a rule between fields), if it has one."""
    return next(iter(checks_of(field)), None)


def _shown(field: attrs.Attribute[Any], value: Any) -> str:
    if isinstance(_check(field), PerName):
        return f"{value[0]}={value[1]!r}"
    return repr(value) if isinstance(value, float) else str(value)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The scenario's flags but ``--seed``, each with its default."""
    for field in _fields():
        flag, check, text = option_of(field), _check(field), help_of(field)
        if _switch(field):
            parser.add_argument(flag, dest=field.name, action="store_true", help=text)
            continue
        if _repeated(field):
            options: dict[str, Any] = {"action": "append", "help": f"{text} (repeatable)"}
        else:
            shown = "derived" if field.default is None else field.default
            options = {"default": None, "help": f"{text} ({shown})"}
        if isinstance(check, Check):
            add_flag(parser, flag, check, dest=field.name, **options)
        else:
            parser.add_argument(flag, dest=field.name, **options)


def scenario_from_args(args: argparse.Namespace, seed: int) -> Scenario:
    values: dict[str, Any] = {"seed": seed}
    for field in _fields():
        value = getattr(args, field.name)
        if _repeated(field):
            values[field.name] = list(value or ())  # as a file gives a list
        elif value is not None:
            values[field.name] = value
    return scenario_of(values)


def command_line(scenario: Scenario) -> str:
    """The ``fdcore simulate`` command that runs ``scenario`` again (options off their defaults)."""
    words = ["fdcore", "simulate", "--seed", str(scenario.seed)]
    for field in _fields():
        value = getattr(scenario, field.name)
        if value == field.default:
            continue
        if _switch(field):
            words.append(option_of(field))
        elif _repeated(field):
            for item in value:
                words += [option_of(field), _shown(field, item)]
        else:
            words += [option_of(field), _shown(field, value)]
    return shlex.join(words)
