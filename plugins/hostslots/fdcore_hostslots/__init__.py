"""fdcore-hostslots: durable execution slots shared by the agent processes of one host.

:mod:`.host` is the host folder (layout, capacity, leases, migration), :mod:`.gate` the agent's
side (host admission ``slots``), :mod:`.commands` ``fdcore host``. See docs/host.md.
"""
