"""Fenced table writes: the default table-writer helper that honours the fencing token.

A table runner is handed the table lease's generation (``FDCORE_FENCING_TOKEN``). Writing through
:func:`fenced_write` stores the output only if

1. the token is the lease's current generation (a newer holder has not taken the lease), as the
   environment's lease provider (``[pipeline] leases``, ``FDCORE_LEASES``) has it, and
2. no write with a newer token has landed (the output file remembers the highest token written,
   and is replaced only with ``If-Match``, so the check and the write are one atomic step).

What fencing cannot cover: side effects in systems that do not check the token (an email sent, a
row written to a database that ignores it). See docs/takeover.md.
"""

from __future__ import annotations

import json
import os
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
from fdcore.plugins.manager import LEASES, Plugins, load_plugins

DEFAULT_LEASES = "mailbox"  # a table process started without FDCORE_LEASES


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


def fenced_write_from_env(
    payload: dict[str, Any], storage: Storage | None = None, plugins: Plugins | None = None
) -> str:
    """:func:`fenced_write` for a table process started by the command runner.

    The environment, its lease provider, the table, the token and the agent's bound of a mailbox
    file come from the ``FDCORE_*`` variables the runner set; the storage and the provider are
    found through ``plugins`` (default: the installed ones).
    """
    plugins = plugins or load_plugins()
    if storage is None:
        # A table process writes into its agent's environment, never a new one.
        storage = plugins.open_storage(os.environ["FDCORE_ENVIRONMENT"], create=False)
    provider = plugins.get(LEASES, os.environ.get("FDCORE_LEASES", DEFAULT_LEASES))
    # Set by the runner from the agent's [agent] max_file_bytes (a process from before it: the
    # default).
    bound = int(os.environ.get("FDCORE_MAX_FILE_BYTES", MAX_FILE_BYTES))
    return fenced_write(
        storage,
        provider.open(storage, {"max_file_bytes": bound}),
        os.environ["FDCORE_TABLE"],
        int(os.environ["FDCORE_FENCING_TOKEN"]),
        payload,
        bound,
    )
