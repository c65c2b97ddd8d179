"""fdcore.testing: what plugin authors and vendors test against (docs/plugins.md, "Testing a
plugin").

* :mod:`fdcore.testing.pytest_plugin`: registered by the fdcore distribution (``pytest11``);
  declares the suite's markers and gives the fixtures ``fdcore_fleet`` (real agent processes),
  ``fdcore_environment`` and ``fdcore_storage_options`` (where they run), ``fdcore_memory_fleet``
  (agents in this process on a memory store, manual clocks), ``fdcore_plugins`` and
  ``fdcore_quiet_agents``.
* :mod:`fdcore.testing.fleet`: :class:`AgentFleet` (behind ``fdcore_fleet``), ``wait_until`` and
  ``submit``: what tests drive real agents with.
* :mod:`fdcore.testing.memory_fleet`: :class:`MemoryFleet`, behind ``fdcore_memory_fleet``.
* :mod:`fdcore.testing.plugins`: ``load_plugins``, ``Plugins`` and the kinds to ask it for an
  implementation by name, as the core does.
* :mod:`fdcore.testing.commands`: ``run_fdcore``, a command in the test's process.
* :mod:`fdcore.testing.tables`: table functions for real agents that log every write with its
  fencing token, and :func:`table_writes` to read the log.
* :mod:`fdcore.testing.assertions`: takeover and fencing asserted (``assert_taken_over``,
  ``assert_no_double_writers``, ``assert_each_table_succeeded_once``).
* :mod:`fdcore.testing.scenarios`: whole scenarios on ``fdcore_fleet``'s agents, asserted
  (``takeover_after_sigkill``, ``outage_mid_run``).
* :mod:`fdcore.testing.servers`: :class:`ServerProcess`, a store's emulator as a process of the
  test on a free loopback port (Azurite and moto's S3 server are built on it).
* :mod:`fdcore.testing.storage_suite`: the storage conformance suite, ``StorageSuite``, made of
  one mixin per property; its tests run the probes of :mod:`fdcore.conformance.probes`, the same
  ones ``fdcore doctor`` runs against a live environment; ``BrokenBackendTests`` (opt-in) proves
  the suite, with a backend's flags, fails each store of :mod:`fdcore.testing.broken`.
* :mod:`fdcore.testing.broken`: deliberately broken stores, each a wrapper around any store that
  breaks one promise (a ``LIKE`` listing, a first-page-only listing, a non-exclusive create...).

Nothing here is imported by this package itself: agents that import a table function from
:mod:`fdcore.testing.tables` do not load pytest.
"""
