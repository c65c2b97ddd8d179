"""Environment URL parsing: every accepted form, and a one-line ConfigError for the rest."""

from __future__ import annotations

import pytest
from fdcore_onelake.plugin import OneLakeBackend
from fdcore_onelake.urls import Location, parse_location, redact

from fdcore.errors import ConfigError, StorageUnavailable
from fdcore.plugins.manager import load_plugins

ONELAKE_BLOB = "https://onelake.blob.fabric.microsoft.com"
WS_GUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
ITEM_GUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

# (url, kind, blob account URL, account, container, prefix)
GOOD = [
    (
        "https://onelake.dfs.fabric.microsoft.com/Sales/orders.Lakehouse/Files/fdcore",
        ("onelake", ONELAKE_BLOB, "onelake", "Sales", "orders.Lakehouse/Files/fdcore/"),
    ),
    (
        "https://onelake.blob.fabric.microsoft.com/Sales/orders.Lakehouse/Files/fd/env-1/",
        ("onelake", ONELAKE_BLOB, "onelake", "Sales", "orders.Lakehouse/Files/fd/env-1/"),
    ),
    (
        "https://onelake.dfs.fabric.microsoft.com/Sales%20Team/orders.Lakehouse/Files/fd",
        ("onelake", ONELAKE_BLOB, "onelake", "Sales Team", "orders.Lakehouse/Files/fd/"),
    ),
    (
        f"https://onelake.dfs.fabric.microsoft.com/{WS_GUID}/{ITEM_GUID}/Files/fd",
        ("onelake", ONELAKE_BLOB, "onelake", WS_GUID, f"{ITEM_GUID}/Files/fd/"),
    ),
    (
        "https://onelake.dfs.fabric.microsoft.com/Sales/orders.Lakehouse/Files",
        ("onelake", ONELAKE_BLOB, "onelake", "Sales", "orders.Lakehouse/Files/"),
    ),
    (
        "abfss://Sales@onelake.dfs.fabric.microsoft.com/orders.Lakehouse/Files/fdcore",
        ("onelake", ONELAKE_BLOB, "onelake", "Sales", "orders.Lakehouse/Files/fdcore/"),
    ),
    (
        f"abfss://{WS_GUID}@onelake.dfs.fabric.microsoft.com/{ITEM_GUID}/Files/a/b",
        ("onelake", ONELAKE_BLOB, "onelake", WS_GUID, f"{ITEM_GUID}/Files/a/b/"),
    ),
    (
        "https://westus-onelake.dfs.fabric.microsoft.com/Sales/orders.Lakehouse/Files/fd",
        (
            "onelake",
            "https://westus-onelake.blob.fabric.microsoft.com",
            "onelake",
            "Sales",
            "orders.Lakehouse/Files/fd/",
        ),
    ),
    (
        "https://acct01.dfs.core.windows.net/mailbox/envs/prod",
        ("adls", "https://acct01.blob.core.windows.net", "acct01", "mailbox", "envs/prod/"),
    ),
    (
        "https://acct01.blob.core.windows.net/mailbox",
        ("adls", "https://acct01.blob.core.windows.net", "acct01", "mailbox", ""),
    ),
    (
        "abfss://mailbox@acct01.dfs.core.windows.net/envs/prod",
        ("adls", "https://acct01.blob.core.windows.net", "acct01", "mailbox", "envs/prod/"),
    ),
    (
        "https://acct01.dfs.core.chinacloudapi.cn/mailbox/prod",
        ("adls", "https://acct01.blob.core.chinacloudapi.cn", "acct01", "mailbox", "prod/"),
    ),
    (
        "http://127.0.0.1:10000/devstoreaccount1/mailbox/env",
        (
            "emulator",
            "http://127.0.0.1:10000/devstoreaccount1",
            "devstoreaccount1",
            "mailbox",
            "env/",
        ),
    ),
    (
        "http://localhost:10000/devstoreaccount1/mailbox",
        ("emulator", "http://localhost:10000/devstoreaccount1", "devstoreaccount1", "mailbox", ""),
    ),
    (
        "http://[::1]:10000/devstoreaccount1/mailbox/a/b",
        ("emulator", "http://[::1]:10000/devstoreaccount1", "devstoreaccount1", "mailbox", "a/b/"),
    ),
]

# (url, a fragment of the one-line error)
BAD = [
    ("https://onelake.dfs.fabric.microsoft.com/Sales", "needs /<workspace>/<item>.Lakehouse"),
    ("https://onelake.dfs.fabric.microsoft.com/Sales/orders/Files/fd", "must be <name>.Lakehouse"),
    ("https://onelake.dfs.fabric.microsoft.com/Sales/orders.Warehouse/Files/x", "Lakehouse"),
    ("https://onelake.dfs.fabric.microsoft.com/Sales/o.Lakehouse/Tables/t", "Files area"),
    ("http://onelake.dfs.fabric.microsoft.com/Sales/o.Lakehouse/Files/f", "https only"),
    ("abfss://onelake.dfs.fabric.microsoft.com/o.Lakehouse/Files/f", "<container or workspace>@"),
    ("https://acct01.dfs.core.windows.net", "needs a container"),
    ("https://acct01.dfs.core.windows.net/Mail_Box/env", "not a valid name"),
    ("https://acct01.dfs.core.windows.net/ab/env", "not a valid name"),
    ("https://acct01.dfs.core.windows.net/mailbox/../etc", "not allowed"),
    ("https://acct01.dfs.core.windows.net/mailbox/.fd", "not allowed"),
    ("https://acct01.dfs.core.windows.net/mailbox/env?sv=2024&sig=SECRET", "query"),
    ("https://example.com/mailbox/env", "is not OneLake"),
    ("s3://bucket/env", "unsupported scheme"),
    ("wasbs://mailbox@acct01.blob.core.windows.net/env", "unsupported scheme"),
    ("http://127.0.0.1:10000", "needs /<account>/<container>"),
    ("http://127.0.0.1:notaport/devstoreaccount1/c", "not a valid URL"),
    ("https://user:pw@acct01.dfs.core.windows.net/mailbox", "only abfss"),
]


@pytest.mark.parametrize(("url", "expected"), GOOD, ids=[url for url, _ in GOOD])
def test_accepted_forms_map_to_one_blob_location(url: str, expected: tuple[str, ...]) -> None:
    assert parse_location(url) == Location(*expected)  # type: ignore[arg-type]
    assert OneLakeBackend().accepts(url)


@pytest.mark.parametrize(("url", "fragment"), BAD, ids=[url for url, _ in BAD])
def test_unusable_urls_are_one_line_config_errors(url: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_location(url)
    message = str(raised.value)
    assert fragment in message
    assert "\n" not in message
    assert "SECRET" not in message and ":pw@" not in message


def test_blob_name_is_prefix_plus_key() -> None:
    location = parse_location("https://acct01.dfs.core.windows.net/mailbox/envs/prod")
    assert location.blob_name("requests/r-1.json") == "envs/prod/requests/r-1.json"


@pytest.mark.parametrize(
    "url",
    [
        "file:///srv/fd",
        "/srv/fd",
        "memory://x",
        "https://example.com/a/b",
        "http://127.0.0.1:9000/bucket/env",  # another emulator's account: not ours unless named
        "http://127.0.0.1/devstoreaccount1/c",  # no port: not an emulator address
    ],
)
def test_backend_leaves_other_urls_to_other_backends(url: str) -> None:
    assert not OneLakeBackend().accepts(url)


def test_redact_hides_passwords_and_queries() -> None:
    assert redact("https://u:secret@h.net/c/f?sig=abc") == "https://u:***@h.net/c/f?..."
    assert redact("https://h.net/c/f") == "https://h.net/c/f"
    assert redact("not a url?sig=x") == "not a url"


@pytest.mark.parametrize("create", [True, False])
def test_opening_asks_the_service_and_a_dead_host_is_one_line(create: bool) -> None:
    # Port 1 answers nobody: opening checks the environment's marker, so it fails at once.
    url = "http://127.0.0.1:1/devstoreaccount1/no-such-container/env"
    with pytest.raises(StorageUnavailable) as raised:
        load_plugins().open_storage(url, create=create)
    message = str(raised.value)
    assert "\n" not in message and "is the URL's host right" in message
