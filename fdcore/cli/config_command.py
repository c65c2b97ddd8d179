"""``fdcore config schema|check|show|docs``: agent.toml's declaration, for editors and people.

``schema`` prints the JSON Schema of agent.toml (editors' TOML support checks a file with it
as it is typed), ``check FILE`` checks a file as an agent does at start-up short of opening its
environment, ``show FILE`` prints the settings an agent would run with, every default filled
in and no secret shown, ``docs`` prints the reference tables of docs/agents.md. Each is
generated from the declaration (:class:`fdcore.settings.agent_toml.AgentToml`), so none can drift.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from fdcore.agent.schedules import build_schedules
from fdcore.cli.config import declared_config, naming_the_file, read_toml
from fdcore.plugins.manager import (
    CLAIM,
    HOST,
    LEASES,
    RUNNER,
    SLOT,
    TAKEOVER,
    Plugins,
    load_plugins,
)
from fdcore.plugins.routes import open_routes
from fdcore.plugins.storage import check_environment
from fdcore.settings.agent_toml import AgentToml
from fdcore.settings.declare import effective, hidden, json_schema, reference

TITLE = "fdcore agent.toml"


def agent_toml_schema(slot_functions: list[str]) -> dict[str, Any]:
    """The JSON Schema of agent.toml; a schedule needs exactly one of ``slot_functions``."""
    schema = json_schema(AgentToml, TITLE)
    schedules = schema["properties"]["schedules"]["items"]
    schedules["oneOf"] = [{"required": [name]} for name in slot_functions]
    return schema


def _schema(args: argparse.Namespace) -> int:
    slots = list(SLOT.ours) if args.ours else list(load_plugins().implementations(SLOT))
    print(json.dumps(agent_toml_schema(slots), indent=2))
    return 0


def check_implementations(plugins: Plugins, declared: AgentToml, source: str) -> None:
    """What an agent resolves at start-up, short of opening its environment: the storage
    backend, claim and takeover policies, lease provider, runner, host admission, notification
    routes and schedules. The first missing or refused one is a one-line error."""
    config = declared.settings(source)
    check_environment(config, plugins)
    plugins.get(CLAIM, config.claim)
    plugins.get(TAKEOVER, config.takeover_policy)
    plugins.get(LEASES, config.leases)
    plugins.get(RUNNER, config.runner)
    if config.host is not None:
        plugins.get(HOST, config.host_admission)
    open_routes(config, plugins)
    build_schedules(config, plugins)


def _check(args: argparse.Namespace) -> int:
    plugins = load_plugins()
    with naming_the_file(args.file):
        declared = declared_config(read_toml(args.file, "an agent.toml"), args.file, plugins)
        check_implementations(plugins, declared, args.file)
    print(f"{args.file}: OK")
    return 0


def shown(declared: AgentToml) -> dict[str, Any]:
    """The effective settings of a file, every default filled in; the options fdcore does not
    know (a backend's, a notifier's) that look like secrets are hidden."""
    settings = effective(declared)
    storage = settings["storage"]
    for key in list(storage):
        storage[key] = hidden(key, storage[key])
    for route in settings["notify"]["routes"].values():
        for key in list(route):
            route[key] = hidden(key, route[key])
    return settings


def _show(args: argparse.Namespace) -> int:
    declared = declared_config(read_toml(args.file, "an agent.toml"), args.file)
    settings = shown(declared)
    print(json.dumps(settings, indent=2) if args.json else "\n".join(to_toml(settings)).strip())
    return 0


def to_toml(settings: dict[str, Any], header: str = "") -> list[str]:
    """``settings`` as TOML: keys first, then tables and arrays of tables."""
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for key, value in settings.items():
        if _is_table(key, value):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables:
        name = f"{header}.{_key(key)}" if header else _key(key)
        for item in value if isinstance(value, list) else [value]:
            inner = to_toml(item, name)
            if isinstance(value, list):
                lines += ["", f"[[{name}]]", *inner]
            elif not inner or inner[0]:  # keys of its own (tables begin with a blank line)
                lines += ["", f"[{name}]", *inner]
            else:
                lines += inner  # a table of tables only: its tables name it
    return lines


def _is_table(key: str, value: Any) -> bool:
    """A table, or an array of tables (``quiet_hours`` is an inline table of its route)."""
    if isinstance(value, dict):
        return not (value and key == "quiet_hours")
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _docs(_args: argparse.Namespace) -> int:
    print("\n".join(reference(AgentToml)).rstrip())
    return 0


class Config:
    """``fdcore config``: a command as any plugin's is (fdcore.abc.Command)."""

    name = "config"
    help = "agent.toml: its schema, check a file, show one"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
        schema = sub.add_parser("schema", help="print the JSON Schema of agent.toml (for editors)")
        schema.add_argument(
            "--ours",
            action="store_true",
            help="only fdcore-slots' timing keys (default: the installed slot functions')",
        )
        schema.set_defaults(config_run=_schema)
        check = sub.add_parser("check", help="check an agent.toml as an agent does at start-up")
        check.add_argument("file", metavar="FILE")
        check.set_defaults(config_run=_check)
        show = sub.add_parser(
            "show", help="print the settings of an agent.toml, defaults filled in"
        )
        show.add_argument("file", metavar="FILE")
        show.add_argument("--json", action="store_true", help="as JSON")
        show.set_defaults(config_run=_show)
        docs = sub.add_parser("docs", help="print the settings reference of docs/agents.md")
        docs.set_defaults(config_run=_docs)

    def run(self, args: argparse.Namespace) -> int:
        run: Any = args.config_run
        return int(run(args))
