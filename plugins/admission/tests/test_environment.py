"""A row keeps allowed, innocently named variables only, and refuses values of 4,096 characters."""

from __future__ import annotations

import pytest
from fdcore_admission.environment import minimise
from fdcore_admission.errors import AdmissionRefused


def test_only_allowed_prefixes_are_kept() -> None:
    kept = minimise({"FDCORE_TABLE": "t", "LANG": "C", "HOME": "/root", "SHELL": "/bin/sh"})
    assert kept == {"FDCORE_TABLE": "t", "LANG": "C"}


@pytest.mark.parametrize(
    "name",
    [
        "FDCORE_TOKEN",
        "FDCORE_SAS_token",
        "FDCORE_CLIENT_SECRET",
        "FDCORE_DB_PASSWORD",
        "FDCORE_API_KEY",
        "FDCORE_KEYRING",
        "FDCORE_STORAGE_CONNECTION_STRING",
        "FDCORE_CONNSTR",
    ],
)
def test_secret_shaped_names_are_dropped(name: str) -> None:
    assert minimise({name: "s3cret", "FDCORE_TABLE": "t"}) == {"FDCORE_TABLE": "t"}


def test_it_is_name_based_not_secret_detection() -> None:
    # a secret under an innocent, allowed name is kept: documented in docs/host.md
    assert minimise({"FDCORE_NOTE": "password=hunter2"}) == {"FDCORE_NOTE": "password=hunter2"}


def test_a_value_of_4095_characters_is_kept() -> None:
    assert minimise({"FDCORE_ARGS": "x" * 4095}) == {"FDCORE_ARGS": "x" * 4095}


@pytest.mark.parametrize("length", [4096, 4097])
def test_a_value_of_4096_characters_or_more_is_refused(length: int) -> None:
    with pytest.raises(AdmissionRefused, match=r"ADMISSION_ENV_VALUE_TOO_LONG.*FDCORE_ARGS"):
        minimise({"FDCORE_ARGS": "x" * length})


def test_a_long_value_of_a_dropped_variable_does_not_matter() -> None:
    assert minimise({"HOME": "x" * 5000, "FDCORE_API_KEY": "k" * 5000}) == {}
