"""Credentials: options naming environment variables, never secrets in messages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fdcore_onelake.credentials import EMULATOR_KEY, resolve_credential
from fdcore_onelake.testing import Azurite
from fdcore_onelake.urls import parse_location

from fdcore.errors import ConfigError, StorageUnavailable
from fdcore.plugins.manager import load_plugins

pytestmark = pytest.mark.processes

ADLS = "https://acct01.dfs.core.windows.net/mailbox/env"
ONELAKE = "https://onelake.dfs.fabric.microsoft.com/Sales/orders.Lakehouse/Files/fd"
EMULATOR = "http://127.0.0.1:10000/devstoreaccount1/mailbox/env"
KEY = "c2VjcmV0LWtleS12YWx1ZS1mb3ItdGVzdHM="  # a made-up secret; must never appear in messages


def credential_for(url: str, options: dict[str, str], environ: dict[str, str]) -> object:
    return resolve_credential(url, parse_location(url), options, environ)


def test_default_is_entra_and_emulator_uses_its_development_key() -> None:
    entra = resolve_credential(ADLS, parse_location(ADLS), {}, {})
    assert entra.identity == "entra" and "DefaultAzureCredential" in entra.description
    onelake = resolve_credential(ONELAKE, parse_location(ONELAKE), {}, {})
    assert onelake.identity == "entra"
    emulator = resolve_credential(EMULATOR, parse_location(EMULATOR), {}, {})
    assert emulator.value == {"account_name": "devstoreaccount1", "account_key": EMULATOR_KEY}


def test_account_key_from_named_variable() -> None:
    options = {"account_key_env": "FD_KEY"}
    credential = resolve_credential(ADLS, parse_location(ADLS), options, {"FD_KEY": KEY})
    assert credential.value == {"account_name": "acct01", "account_key": KEY}
    assert KEY not in credential.identity and KEY not in repr(credential)
    assert credential.description == "account key from $FD_KEY"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"DefaultEndpointsProtocol=https;AccountName=acct01;AccountKey={KEY};", "key"),
        (f"AccountName=acct01; AccountKey={KEY}", "key"),
        (
            "BlobEndpoint=https://acct01.blob.core.windows.net;SharedAccessSignature=sv=1&sig=x",
            "sas",
        ),
    ],
)
def test_connection_string_supplies_the_secret(text: str, expected: str) -> None:
    options = {"connection_string_env": "FD_CONN"}
    credential = resolve_credential(ADLS, parse_location(ADLS), options, {"FD_CONN": text})
    assert credential.identity.startswith(f"{expected}:")
    if expected == "sas":
        assert credential.value == "sv=1&sig=x"
    else:
        assert credential.value == {"account_name": "acct01", "account_key": KEY}


def test_development_storage_connection_string() -> None:
    options = {"connection_string_env": "FD_CONN"}
    environ = {"FD_CONN": "UseDevelopmentStorage=true"}
    credential = resolve_credential(EMULATOR, parse_location(EMULATOR), options, environ)
    assert credential.value == {"account_name": "devstoreaccount1", "account_key": EMULATOR_KEY}


@pytest.mark.parametrize(
    ("url", "options", "environ", "fragment"),
    [
        (
            ADLS,
            {"account_key_env": "FD_KEY"},
            {},
            "[storage] account_key_env: environment variable FD_KEY is not set",
        ),
        (ADLS, {"account_key_env": "FD_KEY"}, {"FD_KEY": "  "}, "FD_KEY is not set"),
        (
            ADLS,
            {"acount_key_env": "FD_KEY"},
            {"FD_KEY": KEY},
            "[storage] acount_key_env: unknown option",
        ),
        (
            ADLS,
            {"account_key_env": "A", "connection_string_env": "B"},
            {"A": KEY, "B": KEY},
            "set only one of",
        ),
        (ONELAKE, {"account_key_env": "FD_KEY"}, {"FD_KEY": KEY}, "OneLake has no account keys"),
        (
            ONELAKE,
            {"connection_string_env": "C"},
            {"C": f"AccountName=onelake;AccountKey={KEY}"},
            "OneLake has no account keys",
        ),
        (
            ADLS,
            {"connection_string_env": "C"},
            {"C": f"AccountName=other;AccountKey={KEY}"},
            "$C names account 'other', the URL names 'acct01'",
        ),
        (
            ADLS,
            {"connection_string_env": "C"},
            {"C": f"{KEY}"},
            "no AccountKey or SharedAccessSignature",
        ),
    ],
)
def test_unusable_options_are_one_line_errors_without_the_secret(
    url: str, options: dict[str, str], environ: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_credential(url, parse_location(url), options, environ)
    message = str(raised.value)
    assert fragment in message
    assert KEY not in message and "\n" not in message


def test_connection_string_env_opens_azurite(
    azurite: Azurite, environment_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDCORE_TEST_CONN", azurite.connection_string)
    store = load_plugins().open_storage(
        environment_url, {"connection_string_env": "FDCORE_TEST_CONN"}
    )
    try:
        etag = store.create("k.json", b"v")
        assert store.read("k.json") is not None
        assert store.read("k.json").etag == etag  # type: ignore[union-attr]
    finally:
        store.close()


def test_wrong_account_key_is_unavailable_and_not_retried_or_leaked(
    environment_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FDCORE_TEST_KEY", KEY)
    with pytest.raises(StorageUnavailable) as raised:  # opening checks the environment
        load_plugins().open_storage(environment_url, {"account_key_env": "FDCORE_TEST_KEY"})
    message = str(raised.value)
    assert "access denied" in message and "HTTP 403 AuthorizationFailure" in message
    assert "account key from $FDCORE_TEST_KEY" in message
    assert KEY not in message and "failed 6 times" not in message


def test_init_never_shows_the_key_it_was_given(azurite: Azurite, environment_url: str) -> None:
    """The account key (Azurite's, the one that works) reaches ``fdcore init`` through the
    variable ``account_key_env`` names: it is not printed, first run or second."""
    env = {**os.environ, "FDCORE_TEST_KEY": EMULATOR_KEY}
    command = [sys.executable, "-m", "fdcore.cli", "-v", "init", environment_url]
    for _ in range(2):  # created, then already an environment
        done = subprocess.run(
            [*command, "--option", "account_key_env=FDCORE_TEST_KEY"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0 and done.stdout, done.stderr
        assert EMULATOR_KEY[:16] not in done.stdout + done.stderr
