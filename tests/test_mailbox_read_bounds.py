"""The bounds of a mailbox read on a real local folder: a size bound an operator can set, a bad
file left unread until it changes, and a listing no tree of folders can make raise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fdcore_localfs.store import LocalFolderStorage

from fdcore.abc import Blob
from fdcore.cli.config import parse_config
from fdcore.contract.codec import MAX_FILE_BYTES
from fdcore.contract.models import Request
from fdcore.errors import ConfigError, UnreadableFile
from fdcore.mailbox.access import Mailbox
from fdcore.mailbox.submit import submit

KEY = "requests/r1.json"


class CountingFolder(LocalFolderStorage):
    """A local folder that counts the mailbox reads it serves."""

    reads = 0

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        self.reads += 1
        return super().read_bounded(key, max_bytes)


def test_a_bad_file_is_not_read_again_until_it_changes(tmp_path: Path) -> None:
    storage = CountingFolder(tmp_path / "env")
    mailbox = Mailbox(storage)
    path = tmp_path / "env" / KEY
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{" * 1000)
    for _ in range(5):
        assert mailbox.read_or_report(Request, KEY) is None
    assert storage.reads == 1  # four more polls cost a stat each, no read
    assert len(mailbox.problems.reported) == 1
    # Fixed in place (same inode, new time), it is read at once.
    path.write_bytes(b'{"id": "r1", "entities": ["a"], "created_at": "2027-01-15T02:00:00Z"}')
    os.utime(path, ns=(1, 1))  # whatever time the edit leaves, it differs from the one read
    found = mailbox.read_or_report(Request, KEY)
    assert found is not None and found.value.entities == ["a"]
    assert storage.reads == 2


def test_the_size_bound_is_the_operators(tmp_path: Path) -> None:
    storage = LocalFolderStorage(tmp_path / "env")
    many_tables = [f"table_{n:05d}" for n in range(1000)]  # about 14 KB of request
    submit(Mailbox(storage), many_tables, request_id="r1")
    assert Mailbox(storage).read(Request, KEY) is not None  # under the default 1 MiB
    small = Mailbox(storage, max_file_bytes=8192)
    with pytest.raises(UnreadableFile, match=r"requests/r1.json: is \d+ bytes, over the bound"):
        small.read(Request, KEY)


def _config(agent: dict[str, object]) -> dict[str, object]:
    return {"agent": {"name": "etl-01", "environment": "/tmp/env", **agent}}


def test_max_file_bytes_is_read_from_agent_toml_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FDCORE_MAX_FILE_BYTES", raising=False)
    assert parse_config(_config({})).max_file_bytes == MAX_FILE_BYTES
    assert parse_config(_config({"max_file_bytes": 4 << 20})).max_file_bytes == 4 << 20
    monkeypatch.setenv("FDCORE_MAX_FILE_BYTES", "65536")
    assert parse_config(_config({})).max_file_bytes == 65536
    assert parse_config(_config({"max_file_bytes": 8192})).max_file_bytes == 8192


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (0, "agent.toml: [agent] max_file_bytes: must be 4096..67108864 bytes, got 0"),
        (1 << 40, "must be 4096..67108864 bytes, got 1099511627776"),
        (True, "[agent] max_file_bytes: expected an integer, got True"),
        ("1MiB", "[agent] max_file_bytes: expected an integer, got '1MiB'"),
    ],
)
def test_a_bad_max_file_bytes_is_one_line_naming_the_key(value: object, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config({"max_file_bytes": value}), source="agent.toml")
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("command", [["queue"], ["retention", "run"]])
def test_a_bad_environment_variable_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    from fdcore.cli.main import main

    LocalFolderStorage(tmp_path / "env")
    monkeypatch.setenv("FDCORE_MAX_FILE_BYTES", "lots")
    assert main([*command, "--env", str(tmp_path / "env")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "environment variable FDCORE_MAX_FILE_BYTES: expected a whole number, got 'lots'"
    ), err
    assert "\n" not in err


def test_a_tree_of_folders_thousands_deep_lists_as_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen: 1,500 nested folders under requests/ raised RecursionError out of every poll."""
    storage = LocalFolderStorage(tmp_path / "env")
    submit(Mailbox(storage), ["a"], request_id="r1")
    deep = tmp_path / "env" / "requests"
    monkeypatch.chdir(deep)  # short relative paths (the tree is deeper than PATH_MAX); undone
    for _ in range(1500):
        os.mkdir("d")
        os.chdir("d")
    Path("x.json").write_text("{}")
    try:
        assert list(Mailbox(storage).request_ids()) == ["r1"]
    finally:
        remove_deep_tree()


def remove_deep_tree() -> None:
    """From the bottom of the tree (the working folder) up: shutil.rmtree, and pytest's clean-up
    of old temporary folders with it, would raise RecursionError on a tree this deep."""
    os.unlink("x.json")
    for _ in range(1500):
        os.chdir("..")
        os.rmdir("d")


def test_a_folder_where_a_request_belongs_is_reported_once(tmp_path: Path) -> None:
    storage = LocalFolderStorage(tmp_path / "env")
    mailbox = Mailbox(storage)
    submit(mailbox, ["a"], request_id="r1")
    inner = tmp_path / "env" / "requests" / "x.json"
    inner.mkdir()
    (inner / "one.json").write_text("{}")
    (inner / "two.json").write_text("{}")
    for _ in range(3):
        assert list(mailbox.request_ids()) == ["r1"]
    assert mailbox.problems.reported == ["requests/x.json: is a folder, not a file: not read"]
