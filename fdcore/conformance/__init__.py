"""The storage conformance probes: each checks one property the mailbox relies on.

The vendor suite (:mod:`fdcore.testing.storage_suite`) and ``fdcore doctor`` run the same
functions of :mod:`.probes`, so what the suite proves on a laptop is what doctor proves on a
tenant.

Layer 7: imports the layers below it (errors, abc, plugins); no pytest.

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); vendors run
these probes through :mod:`fdcore.testing.storage_suite`.
"""

__all__: list[str] = []
