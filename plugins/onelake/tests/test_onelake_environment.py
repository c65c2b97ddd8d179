"""``fdcore.Environment`` on Azurite: a store that cannot watch, so a wait reads the request's
status every ``poll`` seconds, and ends as the status lands."""

from __future__ import annotations

import asyncio
import threading

import pytest
from fdcore_onelake.testing import Azurite

from fdcore.environment import AsyncEnvironment, Environment
from fdcore.errors import RequestCancelled, WaitTimedOut

pytestmark = pytest.mark.processes

SECRET_VARIABLE = "FDCORE_TEST_AZURITE_CONNECTION"


@pytest.fixture
def options(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv(SECRET_VARIABLE, azurite.connection_string)
    return {"connection_string_env": SECRET_VARIABLE}


def test_wait_on_azurite_ends_as_the_status_lands(
    environment_url: str, options: dict[str, str]
) -> None:
    with Environment.open(environment_url, create=True, poll=0.2, **options) as env:
        assert not env.watch.available  # the poll path
        handle = env.submit(["sales"], id="r1")
        with pytest.raises(WaitTimedOut):
            handle.wait(timeout=0.5)
        with Environment.open(environment_url, **options) as other:
            timer = threading.Timer(0.3, lambda: other.cancel("r1", by="ann"))
            timer.start()
            with pytest.raises(RequestCancelled) as caught:
                handle.wait(timeout=30)
            timer.join()
        assert caught.value.story.cancel.by == "ann"
        assert [row.id for row in env.queue().rows] == ["r1"]


def test_the_asyncio_wait_on_azurite(environment_url: str, options: dict[str, str]) -> None:
    async def scenario() -> None:
        async with await AsyncEnvironment.open(
            environment_url, create=True, poll=0.2, **options
        ) as env:
            handle = await env.submit(["sales"], id="r1")
            waiting = asyncio.create_task(handle.wait(timeout=30))
            await asyncio.sleep(0.3)
            await handle.cancel(by="ann")
            with pytest.raises(RequestCancelled):
                await waiting

    asyncio.run(scenario())
