"""The command line and the runtime shell: everything that touches a terminal, a signal or a file
a person wrote.

:mod:`.main` parses arguments and turns every error into one line; :mod:`.config` reads
``agent.toml``; :mod:`.runtime` runs an agent in real time with real signals; :mod:`.commands`,
:mod:`.views`, :mod:`.doctor` and :mod:`.demo` are the commands and what they show;
:mod:`.fleet` starts local agent processes (the demo, and the tests through ``fdcore.testing``).

Layer 9, the top of the core: it may import every layer below, nothing imports it but
``fdcore.testing``.

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); the commands are
its interface.
"""

__all__: list[str] = []
