"""An agent's state as every reader tells it: live, stale, lost, stopped or unreadable.

"Lost" is a takeover policy's verdict, and the same policy the fleet's agents take work over
by: the one an agent's record names (``takeover_policy``, its ``[pipeline] takeover_policy``),
else the default, ``stale_record`` (a record of an earlier release names none). ``fdcore
agents``, the monitor and the incidents all ask here, so none of them calls an agent lost that
its fleet would not take work from, nor misses one it would. A policy that is not installed
where the reader runs judges nobody lost: the agent shows ``stale`` at most, and
:attr:`AgentVerdicts.problems` says why.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fdcore.abc import TakeoverPolicy
from fdcore.contract.models import AgentRecord
from fdcore.errors import PluginError
from fdcore.plugins.manager import TAKEOVER, Plugins, load_plugins

#: The policy of an agent whose record names none (``[pipeline] takeover_policy``'s default).
DEFAULT_POLICY = "stale_record"

#: Every state a reader shows, in the order ``fdcore agents`` explains them.
STATES = ("live", "stale", "lost", "stopped", "unreadable")


class AgentVerdicts:
    """Judges agents for a reader, with the installed takeover policies (loaded once, when
    first needed, or ``plugins`` given)."""

    def __init__(self, plugins: Plugins | None = None) -> None:
        self._plugins = plugins
        self._policies: dict[str, TakeoverPolicy | None] = {}
        self.problems: dict[str, str] = {}  # policy name -> why it judges nobody here

    def policy(self, record: AgentRecord) -> TakeoverPolicy | None:
        """The policy ``record``'s fleet judges it by; None if not installed here."""
        name = record.takeover_policy or DEFAULT_POLICY
        if name not in self._policies:
            if self._plugins is None:
                self._plugins = load_plugins()
            try:
                self._policies[name] = self._plugins.get(TAKEOVER, name)
            except PluginError as exc:
                self._policies[name] = None
                self.problems[name] = f"agents judged by {name!r} are never shown lost: {exc}"
        return self._policies[name]

    def lost(self, record: AgentRecord, now: datetime, grace_seconds: float) -> bool:
        """Whether the agent that wrote ``record`` is lost at ``now`` (a clean stop never is)."""
        if record.stopped_at is not None:
            return False
        policy = self.policy(record)
        return policy is not None and policy.is_lost(record, now, grace_seconds)

    def state(self, record: AgentRecord | None, now: datetime, grace_seconds: float) -> str:
        """``unreadable`` (no record to judge), ``stopped`` (a clean exit), ``lost`` (by its
        policy), ``stale`` (past its own ``stale_after``, not yet lost), else ``live``."""
        if record is None:
            return "unreadable"
        if record.stopped_at is not None:
            return "stopped"
        if self.lost(record, now, grace_seconds):
            return "lost"
        if now > record.updated_at + timedelta(seconds=record.stale_after):
            return "stale"
        return "live"
