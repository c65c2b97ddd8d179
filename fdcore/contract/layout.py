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
    retries/<id>.json                   Retry (the request that runs <id> again)

Every id that becomes part of a key is validated first, so no key leaves its folder.
"""

from __future__ import annotations

from fdcore.contract.ids import validate_id

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
