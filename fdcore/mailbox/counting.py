"""A store wrapper that counts the calls made to it: how a test or a benchmark proves what a
reader costs in store operations, operation by operation, without timing it, and how a running
agent tells its operator what it has cost since it started (``fdcore.cli.runtime``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = [
    "KIND_OF",
    "LISTS",
    "CountingStore",
]

#: The calls that list a folder (the rest read, write or check one key).
LISTS = ("list", "list_versions", "list_changes")
#: Each store call as the operation a store bills (fdcore.pricing's kinds).
KIND_OF = {
    "read": "read",
    "read_bounded": "read",
    "unchanged": "read",
    **dict.fromkeys(LISTS, "list"),
    "create": "create",
    "replace": "replace",
    "delete": "delete",
}


class CountingStore:
    """Wraps any store: each call of one of its methods is counted by name, then passed on
    (the optional protocols it offers stay offered: ``isinstance`` sees the same methods)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name.startswith("_") or not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return found(*args, **kwargs)

        return counted

    def lists(self) -> int:
        """Calls that listed a folder."""
        return sum(self.calls[name] for name in LISTS)

    def by_kind(self) -> Counter[str]:
        """The calls as billed operations (read, list, create, replace, delete); the calls
        that are none (``close``, ``watch``, ...) left out."""
        kinds: Counter[str] = Counter()
        for name, n in list(self.calls.items()):  # another thread may count meanwhile
            kind = KIND_OF.get(name)
            if kind is not None:
                kinds[kind] += n
        return kinds

    def beyond_lists(self) -> dict[str, int]:
        """Every other call, by name."""
        return {name: n for name, n in self.calls.items() if name not in LISTS and n}
