"""Fenced table writes: the default table-writer helper that honours the fencing token.

A table runner is handed the table lease's generation (``FDCORE_FENCING_TOKEN``). Writing through
:func:`fenced_write` stores the output only if

1. the token is the lease's current generation (a newer holder has not taken the lease), as the
   environment's lease provider (``[pipeline] leases``, ``FDCORE_LEASES``) has it, and
2. no write with a newer token has landed (the output file remembers the highest token written,
   and is replaced only with ``If-Match``, so the check and the write are one atomic step).

A table process started by the command runner calls :func:`fdcore.table.fenced_write_from_env`,
which reads the table, the token and the rest from its variables.

What fencing cannot cover: side effects in systems that do not check the token (an email sent, a
row written to a database that ignores it). See docs/takeover.md.
"""

from __future__ import annotations

import json
from typing import Any

from fdcore.abc import Storage, TableLeases
from fdcore.contract.codec import MAX_FILE_BYTES
from fdcore.contract.layout import table_key
from fdcore.errors import (
    AlreadyExists,
    FileTooLarge,
    NotFound,
    PreconditionFailed,
    StaleFencingToken,
)
from fdcore.mailbox.access import Mailbox


def fenced_write(
    storage: Storage,
    leases: TableLeases,
    table: str,
    token: int,
    payload: dict[str, Any],
    max_file_bytes: int = MAX_FILE_BYTES,
) -> str:
    """Write ``payload`` as the table's output in ``storage`` under fencing ``token``.

    ``leases`` are the environment's table leases, from the provider its agents use. The output
    file is read through the mailbox, within ``max_file_bytes`` (the agent's bound). Returns the
    new etag; raises StaleFencingToken when the token is not (or no longer) the current one,
    MailboxFileError when the output file there is none fdcore can read.
    """
    current = leases.current(table)
    if current is None or current.generation != token:
        now = current.generation if current else None
        raise StaleFencingToken(f"table {table}: token {token} rejected (lease generation {now})")
    key = table_key(table)
    body = json.dumps({"fencing_token": token, **payload}, sort_keys=True).encode()
    if len(body) > max_file_bytes:  # no writer leaves a file its readers would refuse
        raise FileTooLarge(key, len(body), max_file_bytes)
    mailbox = Mailbox(storage, max_file_bytes=max_file_bytes)
    while True:
        found = mailbox.read(dict[str, Any], key)  # tables/ is shared with other hands
        try:
            if found is None:
                return storage.create(key, body)
            written = found.value.get("fencing_token", 0)
            if written > token:
                raise StaleFencingToken(
                    f"table {table}: token {token} rejected (a write with token {written} landed)"
                )
            return storage.replace(key, body, found.etag)
        except (AlreadyExists, PreconditionFailed, NotFound):
            continue  # another write landed between our read and write: check again
