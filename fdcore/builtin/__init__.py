"""The implementations shipped inside the core distribution, registered as plugin ``builtin``.

Memory storage (:mod:`.memory`, for tests and the simulator), the ``mailbox`` lease provider
(:mod:`.leases`), the ``command`` and ``python`` table runners (:mod:`.runners`) and the ``log``
notifier (:mod:`.notifiers`); :mod:`.plugin` holds their hook implementations. Everything else
comes from plugin distributions.

Layer 6: imports the layers below (errors, contract, abc, plugins, mailbox: the lease files are
read and written as every mailbox file is), never the agent or the command line.

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); plugins
implement the same protocols from :mod:`fdcore.abc`.
"""

__all__: list[str] = []
