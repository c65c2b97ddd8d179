"""One environment's mailbox, as the agent and the commands use it.

:mod:`.access` reads and writes the contract's files with their etags and reports malformed ones
once; :mod:`.submit` queues a request; :mod:`.fencing` is the table writer's fenced write.

Layer 5: imports the layers below (errors, contract, abc, plugins).

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); plugins read the
files through :mod:`fdcore.contract`; a table process writes through :mod:`fdcore.table`.
"""

__all__: list[str] = []
