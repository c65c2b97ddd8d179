"""An environment as its operators see it: its agents, queue, schedules, requests and
incidents, and what they may do to it. The public face under the commands and the monitor.

Layer 10, between the simulator and the command line: it reads through the mailbox, the
contract's schedule rules and the incident book, never the agent's internals; nothing here parses
arguments, prints or sleeps. Plugins and scripts import from this package only (the names in
``__all__``: :class:`Environment`, its handles, and the views and results it gives); its modules
are its implementation, and what takes a :class:`~fdcore.mailbox.access.Mailbox` stays there,
for the command line:

- :mod:`.views`: the rows (``AgentRow``, ``QueueRow``, ``ScheduleRow``, ``RequestStory``) the
  commands print, their ``--json`` and the monitor show;
- :mod:`.queue`: the queue read once and kept (``QueueReader``), one page of it filtered and
  counted (``QueueFilter``, ``queue_page``);
- :mod:`.actions`: opening an environment and the operator's actions (cancel, retry,
  acknowledge);
- :mod:`.client`: :class:`Environment`, the typed face of all of the above for code
  (docs/python.md), and :class:`RequestHandle`, what its ``submit`` returns; its waits
  (:mod:`.wait`), state changes (:mod:`.changes`) and the store's watch (:mod:`.watch`);
- :mod:`.cost`: what the table runs cost, priced and grouped (``CostReport``);
- :mod:`.aio`: :class:`AsyncEnvironment`, the same as coroutines for asyncio code.
"""

from __future__ import annotations

from fdcore.environment.actions import FILE_BOUND_VARIABLE
from fdcore.environment.aio import AsyncEnvironment, AsyncRequestHandle
from fdcore.environment.changes import Change
from fdcore.environment.client import DEFAULT_GRACE, DEFAULT_POLL, Environment, RequestHandle
from fdcore.environment.cost import COST_GROUPS, NOT_IN_ANY_RUN, CostReport, CostRow
from fdcore.environment.queue import (
    ACTIVE_STATES,
    QueueFilter,
    QueuePage,
    queue_page,
    unfinished,
)
from fdcore.environment.views import (
    AgentRow,
    AttemptStory,
    QueueRow,
    RequestStory,
    RunStory,
    ScheduleRow,
    describe_attempts,
    run_story,
    schedule_rows,
    schedule_warnings,
    shared_by,
    with_host_folder,
    with_host_slots,
)
from fdcore.environment.wait import FINAL_STATES
from fdcore.mailbox.audit import AuditPage, AuditRow
from fdcore.mailbox.cancel import Cancellation

__all__ = [
    "ACTIVE_STATES",
    "COST_GROUPS",
    "DEFAULT_GRACE",
    "DEFAULT_POLL",
    "FILE_BOUND_VARIABLE",
    "FINAL_STATES",
    "NOT_IN_ANY_RUN",
    "AgentRow",
    "AsyncEnvironment",
    "AsyncRequestHandle",
    "AttemptStory",
    "AuditPage",
    "AuditRow",
    "Cancellation",
    "Change",
    "CostReport",
    "CostRow",
    "Environment",
    "QueueFilter",
    "QueuePage",
    "QueueRow",
    "RequestHandle",
    "RequestStory",
    "RunStory",
    "ScheduleRow",
    "describe_attempts",
    "queue_page",
    "run_story",
    "schedule_rows",
    "schedule_warnings",
    "shared_by",
    "unfinished",
    "with_host_folder",
    "with_host_slots",
]
