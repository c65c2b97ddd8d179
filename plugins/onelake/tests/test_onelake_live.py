"""Opt-in: the conformance probes against a live OneLake or ADLS Gen2 folder.

Set ``FDCORE_LIVE_ONELAKE_URL`` to an environment URL (a folder you may write to) and, unless
DefaultAzureCredential finds a login, ``FDCORE_LIVE_ONELAKE_OPTIONS`` to ``[storage]`` options as
``name=value`` pairs separated by commas (e.g. ``connection_string_env=MY_CONN``). Every probe
writes under its own ``fdcore-live-<hex>/`` folder and removes what it wrote. ``fdcore doctor``
runs the same probes from the command line.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from fdcore.conformance.probes import PROBES, Probe, ProbeContext, UrlStorageFactory

URL_VARIABLE = "FDCORE_LIVE_ONELAKE_URL"
OPTIONS_VARIABLE = "FDCORE_LIVE_ONELAKE_OPTIONS"

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get(URL_VARIABLE),
        reason=f"live OneLake test: set {URL_VARIABLE} (and {OPTIONS_VARIABLE}) to run it",
    ),
]


def live_options() -> dict[str, str]:
    pairs = [part for part in os.environ.get(OPTIONS_VARIABLE, "").split(",") if part.strip()]
    options = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"{OPTIONS_VARIABLE}: expected name=value, got {pair!r}")
        options[name.strip()] = value.strip()
    return options


@pytest.fixture
def live_context() -> Iterator[ProbeContext]:
    factory = UrlStorageFactory(os.environ[URL_VARIABLE], live_options())
    context = ProbeContext(
        factory,
        prefix=f"fdcore-live-{uuid.uuid4().hex[:12]}/",
        processes=4,  # a tenant is far away: fewer, smaller races still prove the conditions
        create_rounds=20,
        replace_rounds=10,
        listing_size=300,
        max_payload=1 << 20,
    )
    yield context
    store = factory()
    try:
        for key in list(store.list(context.prefix)):
            store.delete(key)
    finally:
        store.close()


@pytest.mark.parametrize("probe", PROBES, ids=[probe.__name__ for probe in PROBES])
def test_live_probe(probe: Probe, live_context: ProbeContext) -> None:
    observation = probe(live_context)
    assert observation.passed, str(observation)
