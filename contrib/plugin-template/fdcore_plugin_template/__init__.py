"""An example fdcore plugin with one implementation of four extension points.

- ``one_at_a_time``, a claim policy (:mod:`.claim`);
- ``monthly``, a slot function: ``monthly = "1 02:00"`` in a schedule (:mod:`.monthly`);
- ``jsonl``, a notifier: ``[notify.routes.<name>] notifier = "jsonl"`` (:mod:`.notifier`);
- ``fdcore monthly-slots``, a subcommand (:mod:`.command`).

This module is the entry point (``[project.entry-points.fdcore]`` in pyproject.toml): the core
calls its hooks once at start-up. Keep the hooks of the extension points you implement, delete
the others, and see docs/plugins.md for every hook and protocol.
"""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import ClaimPolicy, Command, Notifier, SlotFunction
from fdcore_plugin_template.claim import OneAtATime
from fdcore_plugin_template.command import MonthlySlots
from fdcore_plugin_template.monthly import Monthly
from fdcore_plugin_template.notifier import JsonLinesNotifier


@hookimpl
def fdcore_claim_policies() -> Sequence[ClaimPolicy]:
    return [OneAtATime()]


@hookimpl
def fdcore_slot_functions() -> Sequence[SlotFunction]:
    return [Monthly()]


@hookimpl
def fdcore_notifiers() -> Sequence[Notifier]:
    return [JsonLinesNotifier()]


@hookimpl
def fdcore_commands() -> Sequence[Command]:
    return [MonthlySlots()]
