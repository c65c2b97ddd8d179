"""fdcore.testing: what plugin authors and vendors test against.

The storage conformance suite (:mod:`fdcore.testing.storage_suite`) and the pytest plugin that
ships its fixtures (:mod:`fdcore.testing.pytest_plugin`).
"""
