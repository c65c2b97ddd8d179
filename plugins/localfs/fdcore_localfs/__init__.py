"""fdcore-localfs: the local-folder storage backend (``file:///path`` or a plain path)."""

from fdcore_localfs.store import LocalFolderStorage

__all__ = ["LocalFolderStorage"]
