"""What a plugin's tests drive real agents with, from the public API: the fleet of agent
processes behind the ``fdcore_fleet`` fixture, waiting for an outcome, and submitting a request
as ``fdcore submit`` does (docs/plugins.md, "Testing a plugin")."""

from __future__ import annotations

from fdcore.cli.fleet import AgentFleet, AgentProcess, wait_until
from fdcore.mailbox.submit import submit

__all__ = ["AgentFleet", "AgentProcess", "submit", "wait_until"]
