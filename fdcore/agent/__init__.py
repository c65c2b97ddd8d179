"""The agent: its deterministic poll, made of parts, over a mailbox and an injected clock.

:mod:`.settings` holds what an agent is told, :mod:`.components` resolves the plugins it names,
:mod:`.schedules` turns due slots into requests, and :mod:`.core` is the agent's poll. Nothing
here sleeps, starts threads or reads the wall clock: the runtime shell (:mod:`fdcore.cli.runtime`)
and the simulator drive it.

Layer 7: imports the layers below (errors, clock, durations, contract, abc, plugins, builtin,
mailbox), never the simulator, the command line or ``fdcore.testing``.
"""
