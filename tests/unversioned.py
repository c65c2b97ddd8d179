"""A memory store as a backend without a versioned listing offers it: the form of a mailbox
read without the index's etags (the memory store itself lists with versions)."""

from __future__ import annotations

from fdcore.builtin.memory import MemoryStorage


class Unversioned:
    """``inner`` with every storage operation but ``list_versions``."""

    def __init__(self, inner: MemoryStorage) -> None:
        self.inner = inner
        self.url = inner.url
        self.read = inner.read
        self.create = inner.create
        self.replace = inner.replace
        self.delete = inner.delete
        self.list = inner.list

    @property
    def operations(self) -> int:
        return self.inner.operations

    def close(self) -> None:
        pass
