"""The hook specifications: every way a plugin extends fdcore.

Each hook registers implementations of one extension point. It is called once, when the plugin
manager is set up (``fdcore.plugins.load_plugins``), and the results of **every** plugin are
collected (no hook here is first-result-wins): the core then picks an implementation by the name
given in ``agent.toml``. A name provided by two plugins is an error naming both.

Plugins implement these with ``@fdcore.hookimpl`` in a module named by an entry point in the
``fdcore`` group. Documented, with their exact signatures, in ``docs/plugins.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from fdcore.abc import (
        ClaimPolicy,
        Command,
        HostAdmission,
        LeaseProvider,
        Notifier,
        SlotFunction,
        StorageBackend,
        TableRunner,
        TakeoverPolicy,
    )

PROJECT = "fdcore"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def fdcore_storage_backends() -> Sequence[StorageBackend]:
    """Return the storage backends this plugin provides.

    Called once at start-up. An environment URL is opened by the first backend, in plugin
    registration order, whose ``accepts(url)`` is true (or by the one named in
    ``[storage] backend``).
    """


@hookspec
def fdcore_claim_policies() -> Sequence[ClaimPolicy]:
    """Return the claim policies this plugin provides (``always``, ``when_free``).

    Called once at start-up; the agent uses the one named by ``[pipeline] claim`` before every
    claim and every takeover.
    """


@hookspec
def fdcore_slot_functions() -> Sequence[SlotFunction]:
    """Return the slot functions this plugin provides.

    Called once at start-up. A function's name is the schedule key it parses: a schedule with
    ``every = "1h"`` is parsed by the slot function named ``every``.
    """


@hookspec
def fdcore_takeover_policies() -> Sequence[TakeoverPolicy]:
    """Return the takeover policies this plugin provides (``stale_record``).

    Called once at start-up; the agent asks the one named by ``[pipeline] takeover_policy``
    whether a request's agent is lost before it takes the request over.
    """


@hookspec
def fdcore_notifiers() -> Sequence[Notifier]:
    """Return the notifiers this plugin provides (``log``, ``teams``).

    Called once at start-up; each notification route in agent.toml
    (``[notify.routes.<name>] notifier = "log"``) names the notifier it uses, and the agent opens
    the route's channel with the route's other keys as options.
    """


@hookspec
def fdcore_lease_providers() -> Sequence[LeaseProvider]:
    """Return the table lease providers this plugin provides (``mailbox``).

    Called once at start-up; the agent opens the one named by ``[pipeline] leases`` against the
    environment's storage and takes a table's lease before running it.
    """


@hookspec
def fdcore_table_runners() -> Sequence[TableRunner]:
    """Return the table runners this plugin provides (``command``, ``python``).

    Called once at start-up; the agent starts each table with the one named by
    ``[runner] kind``.
    """


@hookspec
def fdcore_host_admissions() -> Sequence[HostAdmission]:
    """Return the host admissions this plugin provides (``slots`` from fdcore-hostslots).

    Called once at start-up; an agent with ``[agent] host`` opens the one named by
    ``[agent] host_admission`` on that folder, starts each table through it, and gives its claim
    policy the host's free slots.
    """


@hookspec
def fdcore_commands() -> Sequence[Command]:
    """Return the subcommands this plugin adds to the ``fdcore`` command line (``simulate``;
    fdcore's own, ``agent``, ``queue``..., come from the core's plugin ``commands``).

    Called once, when ``fdcore`` builds its argument parser (so on every ``fdcore`` invocation,
    before the arguments are read). The commands of every plugin are collected; a command name
    that two plugins provide runs as the error naming both, and one of fdcore's own names is
    refused (``fdcore plugins`` shows why).
    """
