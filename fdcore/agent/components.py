"""The plugin implementations an agent uses, resolved by name from its settings."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from fdcore.abc import ClaimPolicy, Storage, TableJob, TableLeases, TableRun, TakeoverPolicy
from fdcore.agent.notify import NotificationRoutes, open_routes
from fdcore.agent.settings import AgentConfig
from fdcore.builtin.runners import resolve_function
from fdcore.errors import ConfigError
from fdcore.plugins.manager import CLAIM, LEASES, RUNNER, TAKEOVER, Plugins

StartTable = Callable[[TableJob], TableRun]


@attrs.frozen
class Components:
    """The plugin implementations an agent uses, resolved by name from its config."""

    claim: ClaimPolicy
    takeover: TakeoverPolicy
    leases: TableLeases
    start_table: StartTable
    notify: NotificationRoutes = attrs.field(factory=NotificationRoutes)


def build_components(
    config: AgentConfig, plugins: Plugins, storage: Storage, start_table: StartTable | None = None
) -> Components:
    """Resolve the implementations the config names; unknown names fail here, at start-up."""
    claim = plugins.get(CLAIM, config.claim)
    takeover = plugins.get(TAKEOVER, config.takeover_policy)
    leases = plugins.get(LEASES, config.leases).open(storage, {})
    notify = open_routes(config, plugins)
    run = start_table or _runner(config, plugins, storage.url)

    def start(job: TableJob) -> TableRun:
        # The table's fenced write checks its token with the lease provider this agent uses.
        return run(attrs.evolve(job, leases=config.leases))

    return Components(claim, takeover, leases, start, notify)


def _runner(config: AgentConfig, plugins: Plugins, environment: str) -> StartTable:
    """The configured table runner with its options, checked now rather than at the first table.

    A runner that keeps track of its processes (``end_leftover_runs``, as ``command`` does) ends
    what an earlier instance of this agent left running, before this one starts any table.
    """
    runner = plugins.get(RUNNER, config.runner)
    end_leftovers = getattr(runner, "end_leftover_runs", None)
    if callable(end_leftovers):
        end_leftovers(config.name, environment)
    options = dict(config.runner_options)
    if config.runner == "command" and not options.get("command"):
        raise ConfigError(config.source, "[runner] command", "missing (required)")
    if config.runner == "python":
        try:
            options["function"] = resolve_function(options.get("function"))
        except ValueError as exc:
            raise ConfigError(config.source, "[runner] function", str(exc)) from None

    def start_table(job: TableJob) -> TableRun:
        return runner.start(job, options)

    return start_table
