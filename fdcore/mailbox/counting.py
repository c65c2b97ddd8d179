"""A store wrapper that counts the calls made to it: how a test or a benchmark proves what a
reader costs in store operations, operation by operation, without timing it, how a running
agent tells its operator what it has cost since it started (``fdcore.cli.runtime``), and how
it charges each table run the operations made for it (:meth:`CountingStore.charged_to`)."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Any

__all__ = [
    "KIND_OF",
    "LISTS",
    "CountingStore",
    "charged_to",
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
        # The account this thread's calls are charged to besides (charged_to), by kind.
        self._charged = threading.local()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name.startswith("_") or not callable(found):
            return found

        kind = KIND_OF.get(name)
        calls, charged = self.calls, self._charged

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            account: Counter[str] | None = getattr(charged, "account", None)
            if account is not None and kind is not None:
                account[kind] += 1
            return found(*args, **kwargs)

        # kept: the next call finds it without coming here (a simulated day makes millions)
        setattr(self, name, counted)
        return counted

    def charged_to(self, account: Counter[str] | None) -> _Charged:
        """Within the block, this thread's billed calls are also counted by kind in
        ``account`` (``None``: in none, as outside any block); other threads' are not."""
        return _Charged(self._charged, account)

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


class _Charged:
    """:meth:`CountingStore.charged_to`'s block (a class: agents enter one per held request
    at every step)."""

    __slots__ = ("account", "before", "local")

    def __init__(self, local: threading.local, account: Counter[str] | None) -> None:
        self.local, self.account = local, account
        self.before: Counter[str] | None = None

    def __enter__(self) -> None:
        self.before = getattr(self.local, "account", None)
        self.local.account = self.account

    def __exit__(self, *exc: object) -> None:
        self.local.account = self.before


def charged_to(
    storage: object, account: Counter[str] | None
) -> contextlib.AbstractContextManager[None]:
    """:meth:`CountingStore.charged_to` of ``storage``; nothing for a store that is not counted."""
    if isinstance(storage, CountingStore):
        return storage.charged_to(account)
    return contextlib.nullcontext()


def counted_by_kind(storage: object) -> Counter[str] | None:
    """What ``storage`` counted, by kind; None for a store that is not counted."""
    return storage.by_kind() if isinstance(storage, CountingStore) else None
