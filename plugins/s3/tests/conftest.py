"""Fixtures of the fdcore-s3 tests: one S3 emulator for the session, a fresh folder per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fdcore_s3.plugin import S3Backend
from fdcore_s3.testing import S3Emulator, credentials_environment

BUCKET = "fdcore-tests"


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Emulator]:
    """moto's S3 server for the whole session (in memory), with the tests' bucket."""
    with S3Emulator() as emulator:
        emulator.create_bucket(BUCKET)
        yield emulator


@pytest.fixture(autouse=True)
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's standard chain finds the emulator's made-up credentials in the environment
    (and nothing of the developer's own ~/.aws)."""
    for name, value in credentials_environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)


@pytest.fixture
def environment_url(s3: S3Emulator) -> str:
    """The URL of a new, empty environment, as ``fdcore init`` leaves it: a unique folder of
    the session's bucket holding the environment's marker."""
    url = s3.url(BUCKET, f"env-{uuid.uuid4().hex[:12]}")
    S3Backend().open(url, s3.options, create=True).close()
    return url
