"""Where each mailbox file lives under an environment root (mailbox contract 1).

::

    requests/<id>.json                  Request
    status/<id>.json                    Status (created by the claim)
    agents/<name>.json                  AgentRecord
    leases/<table>.json                 Lease (the ``mailbox`` lease provider)
    fences/<table>.json                 the same Lease, written first: survives the lease's loss
    runs/<id>/<attempt>-<table>.json    RunRecord
    tables/<table>.json                 a fenced table write (``fdcore.mailbox.fencing``)
    incidents/incidents.json            IncidentDocument
    cancels/<id>.json                   Cancel (an operator's ``fdcore cancel``)
    signal/changes.json                 the change signal: deleted after each new request
                                        (``fdcore.mailbox.signal``); optional
    retries/<id>.json                   Retry (the request that runs <id> again)
    audit/<event id>.json               AuditEvent: one workload action, created once
    archive/index/<id>.json             ArchiveEntry: the day folder an archived request is in
    archive/YYYY/MM/DD/requests/<id>.json, .../status/<id>.json, .../runs/<id>/...,
    .../cancels/<id>.json, .../retries/<id>.json
                                        the same files, moved there by retention
    archive/YYYY/MM/DD/audit/<event id>.json
                                        an audit event older than keep (its own day)

Every id that becomes part of a key is validated first, so no key leaves its folder.
"""

from __future__ import annotations

from datetime import datetime, timezone

from fdcore.contract.ids import validate_id

__all__ = [
    "AGENTS",
    "ARCHIVE",
    "ARCHIVE_INDEX",
    "AUDIT",
    "CANCELS",
    "FENCES",
    "INCIDENTS",
    "LEASES",
    "REQUESTS",
    "RETRIES",
    "RUNS",
    "SIGNAL",
    "STATUS",
    "TABLES",
    "agent_key",
    "archive_day",
    "archive_index_key",
    "archived_key",
    "archived_runs_prefix",
    "audit_key",
    "cancel_key",
    "fence_key",
    "lease_key",
    "request_key",
    "retry_key",
    "run_key",
    "status_key",
    "table_key",
]

REQUESTS = "requests/"
STATUS = "status/"
AGENTS = "agents/"
RUNS = "runs/"
LEASES = "leases/"
FENCES = "fences/"
TABLES = "tables/"
INCIDENTS = "incidents/incidents.json"
CANCELS = "cancels/"
RETRIES = "retries/"
ARCHIVE = "archive/"
ARCHIVE_INDEX = "archive/index/"
AUDIT = "audit/"
SIGNAL = "signal/changes.json"


def request_key(request_id: str) -> str:
    return f"{REQUESTS}{validate_id(request_id, 'request id')}.json"


def status_key(request_id: str) -> str:
    return f"{STATUS}{validate_id(request_id, 'request id')}.json"


def agent_key(name: str) -> str:
    return f"{AGENTS}{validate_id(name, 'agent name')}.json"


def run_key(request_id: str, attempt: int, table: str) -> str:
    return f"{RUNS}{validate_id(request_id, 'request id')}/{attempt:03d}-{table}.json"


def lease_key(table: str) -> str:
    return f"{LEASES}{validate_id(table, 'table name')}.json"


def fence_key(table: str) -> str:
    return f"{FENCES}{validate_id(table, 'table name')}.json"


def table_key(table: str) -> str:
    return f"{TABLES}{validate_id(table, 'table name')}.json"


def cancel_key(request_id: str) -> str:
    return f"{CANCELS}{validate_id(request_id, 'request id')}.json"


def retry_key(request_id: str) -> str:
    return f"{RETRIES}{validate_id(request_id, 'request id')}.json"


def audit_key(event_id: str) -> str:
    return f"{AUDIT}{validate_id(event_id, 'audit event id')}.json"


# -- the archive (retention) -------------------------------------------------------------------


def archive_day(when: datetime) -> str:
    """The day folder of a request that finished at ``when``: ``YYYY/MM/DD`` in UTC."""
    return when.astimezone(timezone.utc).strftime("%Y/%m/%d")


def archive_index_key(request_id: str) -> str:
    return f"{ARCHIVE_INDEX}{validate_id(request_id, 'request id')}.json"


def archived_key(day: str, live_key: str) -> str:
    """Where a live request, status, run or audit file lives in day ``day``'s folder."""
    if not live_key.startswith((REQUESTS, STATUS, RUNS, CANCELS, RETRIES, AUDIT)):
        raise ValueError(f"{live_key!r} is not a request, status, run, cancel, retry or audit file")
    return f"{ARCHIVE}{day}/{live_key}"


def archived_runs_prefix(day: str, request_id: str) -> str:
    return f"{ARCHIVE}{day}/{RUNS}{validate_id(request_id, 'request id')}/"
