"""A OneLake / ADLS environment exists only where ``fdcore init`` marked it, on Azurite: init
proves the container before it marks, every command and ``Environment.open`` refuse a folder it
did not mark, and each failure of init or doctor is one line."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from azure.storage.blob import BlobServiceClient
from fdcore_onelake.testing import Azurite

from fdcore import Environment
from fdcore.cli.main import main
from fdcore.errors import EnvironmentNotFound

pytestmark = pytest.mark.processes

CONTAINER = "fdcore-tests"  # the session's container (conftest.py)


def fdcore(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def blobs(azurite: Azurite, folder: str) -> list[str]:
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    with service:
        listed = service.get_container_client(CONTAINER).list_blobs(name_starts_with=folder + "/")
        return [blob.name[len(folder) + 1 :] for blob in listed]


def test_a_typod_folder_is_not_found_by_commands_and_open(
    azurite: Azurite, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = f"prdo-{uuid.uuid4().hex[:8]}"
    url = azurite.url(CONTAINER, folder)
    for argv in (
        ("queue", "--env", url),
        ("submit", "--env", url, "--entities", "sales"),
        ("agents", "--env", url),
    ):
        code, out, err = fdcore(capsys, *argv)
        assert code == 2 and out == "", (argv, out, err)
        assert err.startswith(f"fdcore: error: environment not found: {url}"), (argv, err)
        assert err.count("\n") == 1
    with pytest.raises(EnvironmentNotFound):
        Environment.open(url)
    assert blobs(azurite, folder) == []  # the submission landed nowhere


def test_init_marks_the_folder_once_then_commands_work(
    azurite: Azurite, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = f"fresh-{uuid.uuid4().hex[:8]}"
    url = azurite.url(CONTAINER, folder)
    assert fdcore(capsys, "init", url) == (0, f"{url}: created\n", "")
    assert fdcore(capsys, "init", "--env", url) == (0, f"{url}: already an environment\n", "")
    assert blobs(azurite, folder) == [".fdcore/environment.json"]  # the probe blob was removed
    with Environment.open(url) as environment:
        environment.submit(["sales"], id="r1")
        assert [row.id for row in environment.queue().rows] == ["r1"]
        assert list(environment.mailbox.storage.list("requests/")) == ["requests/r1.json"]


@pytest.mark.parametrize("where", ["refused credentials", "missing container"])
def test_init_that_cannot_use_the_store_is_one_line(
    azurite: Azurite,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    url, argv = azurite.url(CONTAINER, f"denied-{uuid.uuid4().hex[:8]}"), []
    if where == "refused credentials":
        monkeypatch.setenv("WRONG_KEY", "d3Jvbmcga2V5IG9mIHRoZSByaWdodCBsZW5ndGggZm9yIGF6dXJpdGU=")
        argv = ["--option", "account_key_env=WRONG_KEY"]
        named = "access denied"
    else:
        url = azurite.url("no-such-container", "env")
        named = "container 'no-such-container' does not exist"
    code, out, err = fdcore(capsys, "init", url, *argv)
    assert (code, out) == (2, ""), err
    assert err.startswith("fdcore: error: ") and err.count("\n") == 1 and named in err, err
    assert "d3Jvbmcga2V5" not in err  # the key itself is never shown


def test_doctor_on_a_missing_container_is_one_line(azurite: Azurite) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fdcore", "doctor", azurite.url("no-such-container", "env")],
        capture_output=True,
        text=True,
        timeout=60,  # at the defaults a probe run takes far longer: this bounds "no probe ran"
    )
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and result.returncode in (1, 2), lines
    assert "container 'no-such-container' does not exist" in lines[0]
