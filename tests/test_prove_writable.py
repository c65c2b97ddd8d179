"""``fdcore.abc.prove_writable``: what a store without folders runs before it marks a new
environment. It leaves nothing behind, and a store that refuses a write or a delete is the
store's own one-line error, its probe removed where the store allows."""

from __future__ import annotations

import pytest

from fdcore.abc import prove_writable
from fdcore.builtin.memory import MemoryStorage
from fdcore.errors import StorageUnavailable
from fdcore.testing.broken import BrokenStorage


class NoReplace(BrokenStorage):
    """Refuses every replace, as a store whose policy lacks the right would."""

    def replace(self, key: str, data: bytes, etag: str) -> str:
        raise StorageUnavailable(key, "replace: access denied")


class NoDelete(BrokenStorage):
    """Refuses every delete."""

    def delete(self, key: str, etag: str | None = None) -> None:
        raise StorageUnavailable(key, "delete: access denied")


def test_a_usable_store_is_proved_and_left_as_it_was() -> None:
    store = MemoryStorage("prove-usable")
    store.create("requests/r1.json", b"{}")
    prove_writable(store)
    assert list(store.list()) == ["requests/r1.json"]


def test_a_refused_replace_is_the_error_and_the_probe_is_removed() -> None:
    inner = MemoryStorage("prove-no-replace")
    with pytest.raises(StorageUnavailable, match="replace: access denied"):
        prove_writable(NoReplace(inner))
    assert list(inner.list()) == []


def test_a_refused_delete_is_the_error() -> None:
    with pytest.raises(StorageUnavailable, match="delete: access denied"):
        prove_writable(NoDelete(MemoryStorage("prove-no-delete")))
