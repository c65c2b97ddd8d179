"""Incidents: the fleet watching itself and telling a person (docs/incidents.md).

- :mod:`.book`: the incident document, changed only by ``If-Match`` read-modify-write.
- :mod:`.evaluate`: what is wrong now (``agent_offline``, ``request_failed``, ``slot_missed``,
  ``schedule_conflict``; ``objective`` from :mod:`.objectives`), opening, bumping and resolving
  incidents, each kind only from inputs actually read.
- :mod:`.delivery`: which route gets which incident and when (kinds, escalation, quiet hours,
  digests), claimed in the document so that of several agents exactly one posts.
- :mod:`.watch`: the agent's timer, on a thread of its own, off the poll path.

Layer: above :mod:`fdcore.agent`, below the simulator and the command line; it imports nothing
from the agent (its settings are :mod:`fdcore.settings.agent_toml`'s, its routes
:mod:`fdcore.plugins.routes`').

Internal: not part of fdcore's public API (docs/architecture.md, "Public API"); notifiers get a
:class:`fdcore.abc.Notification`.
"""

__all__: list[str] = []
