"""fdcore: share one environment's work across a fleet of agents through a mailbox in storage.

From code: ``from fdcore import Environment`` (docs/python.md). Those names are loaded on first
use, so ``import fdcore`` (every plugin does, for ``hookimpl``) stays light.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("fdcore")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

MAILBOX_CONTRACT = 1
STATUS_CONTRACT = 1

__all__ = ["MAILBOX_CONTRACT", "STATUS_CONTRACT", "__version__"]

from fdcore.plugins.hookspecs import hookimpl  # noqa: E402  (after __version__, which plugins read)

__all__ += ["hookimpl"]

#: The public API for code, loaded from :mod:`fdcore.environment` and :mod:`fdcore.errors` on
#: first use (PEP 562): importing them here would load the whole core with every plugin.
_ENVIRONMENT = (
    "AsyncEnvironment",
    "AsyncRequestHandle",
    "Change",
    "Environment",
    "QueueFilter",
    "RequestHandle",
    "RequestStory",
)
_ERRORS = (
    "FdcoreError",
    "RequestCancelled",
    "RequestDidNotSucceed",
    "RequestExpired",
    "RequestFailed",
    "RequestNotFound",
    "WaitTimedOut",
)
__all__ += [*_ENVIRONMENT, *_ERRORS]

if TYPE_CHECKING:  # the names as the type checker sees them (redundant aliases: re-exports)
    from fdcore.environment import AsyncEnvironment as AsyncEnvironment
    from fdcore.environment import AsyncRequestHandle as AsyncRequestHandle
    from fdcore.environment import Change as Change
    from fdcore.environment import Environment as Environment
    from fdcore.environment import QueueFilter as QueueFilter
    from fdcore.environment import RequestHandle as RequestHandle
    from fdcore.environment import RequestStory as RequestStory
    from fdcore.errors import FdcoreError as FdcoreError
    from fdcore.errors import RequestCancelled as RequestCancelled
    from fdcore.errors import RequestDidNotSucceed as RequestDidNotSucceed
    from fdcore.errors import RequestExpired as RequestExpired
    from fdcore.errors import RequestFailed as RequestFailed
    from fdcore.errors import RequestNotFound as RequestNotFound
    from fdcore.errors import WaitTimedOut as WaitTimedOut


def __getattr__(name: str) -> Any:
    if name in _ENVIRONMENT:
        import fdcore.environment

        return getattr(fdcore.environment, name)
    if name in _ERRORS:
        import fdcore.errors

        return getattr(fdcore.errors, name)
    raise AttributeError(f"module 'fdcore' has no attribute {name!r}")
