"""The agent: its deterministic poll, made of parts, over a mailbox and an injected clock.

What an agent is told is declared in :mod:`fdcore.settings.agent_toml`; :mod:`.components`
resolves the plugins it names,
:mod:`.schedules` turns due slots into requests, and :mod:`.core` is the agent
(:class:`~fdcore.agent.core.Agent`), whose poll composes six parts over the requests it holds
(:mod:`.work`): :mod:`.presence` (its own status record), :mod:`.tables` (each held request's
tables under their leases), :mod:`.status_changes` (every write to a request's status),
:mod:`.discovery` (finding requests to claim, resume, take over or expire), :mod:`.cancels`
(operators' cancels) and :mod:`.retention` (finished requests to the archive). Nothing here sleeps,
starts threads or reads the wall clock: the runtime shell (:mod:`fdcore.cli.runtime`) and the
simulator drive it.

Layer 8: imports the layers below (errors, clock, durations, contract, settings, abc, plugins,
builtin, mailbox), never the simulator, the command line or ``fdcore.testing``.

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); plugins reach
the agent only through the hooks.
"""

__all__: list[str] = []
