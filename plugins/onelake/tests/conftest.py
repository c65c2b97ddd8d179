"""Fixtures of the fdcore-onelake tests: one Azurite for the session, a fresh folder per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fdcore_onelake.plugin import OneLakeBackend
from fdcore_onelake.testing import Azurite, AzuriteMissing

CONTAINER = "fdcore-tests"


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """Azurite for the whole session (in memory). Missing Azurite fails: CI must prove it."""
    try:
        emulator = Azurite()
    except AzuriteMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    with emulator:
        emulator.create_container(CONTAINER)
        yield emulator


@pytest.fixture
def container(azurite: Azurite) -> str:
    """The session Azurite's container (created with it)."""
    return CONTAINER


@pytest.fixture
def environment_url(azurite: Azurite) -> str:
    """The URL of a new, empty environment, as ``fdcore init`` leaves it: a unique folder of
    the session's container holding the environment's marker."""
    url = azurite.url(CONTAINER, f"env-{uuid.uuid4().hex[:12]}")
    OneLakeBackend().open(url, {}, create=True).close()
    return url
