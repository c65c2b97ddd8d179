"""The plugin implementations an agent uses, resolved by name from its settings."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from fdcore.abc import (
    AgentLoad,
    ClaimPolicy,
    HostGate,
    Storage,
    TableJob,
    TableLeases,
    TableRun,
    TakeoverPolicy,
)
from fdcore.builtin.runners import resolve_function
from fdcore.errors import ConfigError
from fdcore.plugins.manager import CLAIM, HOST, LEASES, RUNNER, TAKEOVER, Plugins
from fdcore.plugins.routes import NotificationRoutes, open_routes
from fdcore.settings.agent_toml import AgentConfig

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
    leases = plugins.get(LEASES, config.leases).open(
        storage, {"max_file_bytes": config.max_file_bytes}
    )
    notify = open_routes(config, plugins)
    run = start_table or _runner(config, plugins, storage.url)

    def start(job: TableJob) -> TableRun:
        # The table's fenced write checks its token with the lease provider this agent uses,
        # and reads within the agent's bound.
        # It opens the environment with the agent's [storage] options (never secrets).
        return run(
            attrs.evolve(
                job,
                leases=config.leases,
                max_file_bytes=config.max_file_bytes,
                storage_backend=config.storage_backend,
                storage_options=dict(config.storage_options),
            )
        )

    gate = _host_gate(config, plugins)
    if gate is not None:
        return Components(HostClaim(claim, gate), takeover, leases, _admitted(gate, start), notify)
    return Components(claim, takeover, leases, start, notify)


# -- the host's admission, with ``[agent] host`` (docs/host.md) -------------------------------


def _host_gate(config: AgentConfig, plugins: Plugins) -> HostGate | None:
    if config.host is None:
        return None
    options = {"agent": config.name, "lease_seconds": config.lease_ttl}
    return plugins.get(HOST, config.host_admission).open(config.host, options)


def _admitted(gate: HostGate, start: StartTable) -> StartTable:
    """Every table starts once the host admits it, and frees the host's place when it ends."""

    def start_admitted(job: TableJob) -> TableRun:
        return gate.admit(job, start)

    return start_admitted


class HostClaim:
    """The configured claim policy, shown the host's free slots as well as the agent's load."""

    def __init__(self, policy: ClaimPolicy, gate: HostGate) -> None:
        self.name = policy.name
        self.policy = policy
        self.gate = gate

    def may_claim(self, load: AgentLoad) -> bool:
        slots = self.gate.slots()
        host_free = None if slots is None else slots.free
        return self.policy.may_claim(attrs.evolve(load, host_free=host_free))


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
