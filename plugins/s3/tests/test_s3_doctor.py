"""``fdcore doctor`` on the S3 emulator: it passes a store that keeps the conditional writes, and
refuses one that ignores ``If-Match`` (the emulator told to drop the header), naming the
properties that broke."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from fdcore_s3.plugin import S3Backend
from fdcore_s3.testing import S3Emulator

pytestmark = pytest.mark.processes

# Small rounds: process start-up dominates on 2 cores. --page-size 50 lists 101 keys for the
# paging probe instead of 2,001; the storage suite crosses real pages (of 100 keys).
SMALL = ["--rounds", "3", "--processes", "2", "--keys", "40", "--max-payload", "65536"]
SMALL += ["--page-size", "50"]


def doctor(url: str, emulator: S3Emulator) -> subprocess.CompletedProcess[str]:
    options = [f"--option={key}={value}" for key, value in emulator.options.items()]
    return subprocess.run(
        [sys.executable, "-m", "fdcore", "doctor", url, *SMALL, *options],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def careless_s3() -> Iterator[S3Emulator]:
    """An S3 that ignores If-Match: every replace and conditional delete goes through."""
    with S3Emulator(ignore=("If-Match",)) as emulator:
        emulator.create_bucket("careless")
        yield emulator


@pytest.mark.slow
def test_doctor_passes_the_emulator(environment_url: str, s3: S3Emulator) -> None:
    result = doctor(environment_url, s3)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS replace-if-match: 2 processes x 3 rounds on one etag, exactly one winner" in (
        result.stdout
    )
    assert "PASS optional-protocols: offers BoundedRead, ChangeCheck, StoreClock" in result.stdout
    assert "FAIL" not in result.stdout and "INFO" not in result.stderr  # no boto3 chatter


@pytest.mark.slow
def test_doctor_refuses_a_store_that_ignores_if_match(careless_s3: S3Emulator) -> None:
    url = careless_s3.url("careless", "env")
    S3Backend().open(url, careless_s3.options, create=True).close()  # as `fdcore init` does
    result = doctor(url, careless_s3)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = {line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("FAIL")}
    # Every promise resting on If-Match, and no other.
    assert failed == {
        "FAIL stale-etag-refused",
        "FAIL absent-key",
        "FAIL replace-if-match",
        "FAIL delete-if-match",
        "FAIL no-lost-updates",
    }, result.stdout
    assert (
        "FAIL stale-etag-refused: observed replace with stale etag succeeded, "
        "expected PreconditionFailed"
    ) in result.stdout
    assert "PASS create-if-absent" in result.stdout  # If-None-Match still holds there
