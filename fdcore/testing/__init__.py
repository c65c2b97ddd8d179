"""fdcore.testing: what plugin authors and vendors test against.

* :mod:`fdcore.testing.storage_suite`: the storage conformance suite; subclass ``StorageSuite``.
* :mod:`fdcore.testing.probes`: the suite's probes as plain functions, each returning an
  ``Observation``; ``fdcore doctor`` runs the same ones against a live environment.
* :mod:`fdcore.testing.pytest_plugin`: registered by the fdcore distribution; declares the
  suite's markers.
"""
