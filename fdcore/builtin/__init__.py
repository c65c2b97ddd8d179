"""The implementations shipped inside the core distribution, registered as plugin ``builtin``.

Memory storage (:mod:`.memory`, for tests and the simulator), the ``mailbox`` lease provider
(:mod:`.leases`), the ``command`` and ``python`` table runners (:mod:`.runners`) and the ``log``
notifier (:mod:`.notifiers`); :mod:`.plugin` holds their hook implementations. Everything else
comes from plugin distributions.

Layer 4: imports the layers below (errors, contract, abc, plugins), never the mailbox, the agent
or the command line.
"""
