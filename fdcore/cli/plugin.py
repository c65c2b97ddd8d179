"""The hook implementation of plugin ``commands``: fdcore's own commands.

fdcore's commands are added the way any plugin adds one: a class with ``name``, ``help``,
``add_arguments`` and ``run`` (``fdcore.abc.Command``), returned from ``fdcore_commands``. The
plugin manager registers this module by name, beside the ``builtin`` plugin (docs/plugins.md,
"Adding a command"). A new command goes in the module that does its work, and into the list
below, where ``fdcore --help`` shows it.
"""

from __future__ import annotations

from collections.abc import Sequence

from fdcore.abc import Command
from fdcore.cli import actions, commands, installed
from fdcore.cli.audit import Audit
from fdcore.cli.config_command import Config
from fdcore.cli.cost import Cost
from fdcore.cli.demo import Demo
from fdcore.cli.doctor import Doctor
from fdcore.cli.incidents import Incidents
from fdcore.cli.notify import Notify
from fdcore.cli.retention import Retention
from fdcore.cli.runs import Runs
from fdcore.cli.wait import Wait
from fdcore.plugins.hookspecs import hookimpl


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [
        installed.PluginList(),
        *commands.COMMANDS,
        *actions.COMMANDS,
        Audit(),
        Runs(),
        Cost(),
        Wait(),
        Config(),
        Demo(),
        Doctor(),
        Incidents(),
        Notify(),
        Retention(),
    ]
