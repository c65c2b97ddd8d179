"""The probes' race workers run in their caller's environment, whenever their process started.

A forkserver keeps the environment it started with: a vendor's fixture that sets the store's
credentials after an earlier test started it (CI ran the local folder's suite first) left the
S3 suite's workers without them ("no credentials in boto3's standard chain").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance_workers import environment_value

from fdcore.conformance.crew import run_crew
from fdcore.conformance.probes import ProbeContext, UrlStorageFactory

NAME = "FDCORE_TEST_RACE_CREDENTIAL"


def test_race_workers_see_the_environment_set_after_their_server_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = ProbeContext(factory=UrlStorageFactory(tmp_path.as_uri()), multiprocess=True)
    monkeypatch.delenv(NAME, raising=False)
    assert run_crew(ctx, 2, environment_value, NAME) == [None, None]  # its server starts here
    monkeypatch.setenv(NAME, "made-up")
    assert run_crew(ctx, 2, environment_value, NAME) == ["made-up", "made-up"]
