"""What a table process started by the ``command`` runner calls: the fenced write of its output.

::

    from fdcore.table import fenced_write_from_env

    fenced_write_from_env({"rows": 1200})

The write lands only while the process's fencing token is its table lease's current generation
(docs/takeover.md). Everything it needs comes from the ``FDCORE_*`` variables the runner set
(:mod:`fdcore.settings.table_process`): the environment and its ``[storage]`` options, the lease
provider, the table, the token and the agent's bound of a mailbox file.
"""

from __future__ import annotations

import os
from typing import Any

from fdcore.abc import Storage
from fdcore.mailbox.fencing import fenced_write
from fdcore.plugins.manager import LEASES, Plugins, load_plugins
from fdcore.settings.table_process import read_table_variables

__all__ = ["fenced_write_from_env"]


def fenced_write_from_env(
    payload: dict[str, Any], storage: Storage | None = None, plugins: Plugins | None = None
) -> str:
    """Write ``payload`` as this table process's output, fenced by its token; returns the new
    etag.

    The storage and the lease provider are found through ``plugins`` (default: the installed
    ones) unless ``storage`` is given. Raises StaleFencingToken when the token is not (or no
    longer) the lease's current one, FileTooLarge when the output is over the agent's bound,
    ConfigError naming a variable that is missing or bad.
    """
    told = read_table_variables(os.environ)
    plugins = plugins or load_plugins()
    if storage is None:
        # A table process writes into its agent's environment, never a new one.
        storage = plugins.open_storage(
            told.environment,
            dict(told.storage_options),
            told.storage_backend,
            create=False,
        )
    provider = plugins.get(LEASES, told.leases)
    return fenced_write(
        storage,
        provider.open(storage, {"max_file_bytes": told.max_file_bytes}),
        told.table,
        told.fencing_token,
        payload,
        told.max_file_bytes,
    )
