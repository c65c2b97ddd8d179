"""fdcore: share one environment's work across a fleet of agents through a mailbox in storage."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fdcore")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

MAILBOX_CONTRACT = 1
STATUS_CONTRACT = 1

__all__ = ["MAILBOX_CONTRACT", "STATUS_CONTRACT", "__version__"]

from fdcore.plugins.hookspecs import hookimpl  # noqa: E402  (after __version__, which plugins read)

__all__ += ["hookimpl"]
