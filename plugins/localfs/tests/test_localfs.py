"""What only the local folder backend promises: atomic files, a real flock, honest errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fdcore_localfs import LocalFolderStorage

from fdcore.abc import Storage
from fdcore.conformance.probes import check_payload, make_payload
from fdcore.errors import (
    ConfigError,
    EnvironmentNotFound,
    EnvironmentUnusable,
    InvalidKey,
    StorageUnavailable,
)
from fdcore.plugins.manager import load_plugins

pytestmark = pytest.mark.processes


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    """A real child process running ``code`` (helpers live in strings: nothing to import)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalFolderStorage]:
    opened = LocalFolderStorage(tmp_path / "env")
    yield opened
    opened.close()


# -- a reader never sees a partial file ----------------------------------------------------------

REWRITER = """
    import sys
    from pathlib import Path
    from fdcore.conformance.probes import make_payload
    from fdcore_localfs import LocalFolderStorage

    store = LocalFolderStorage(Path(sys.argv[1]))
    key, rounds = sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    for n in range(rounds):
        current = store.read(key)
        store.replace(key, make_payload(f"big/{n}", (8 << 20) + n), current.etag)
    print("done", flush=True)
"""


def test_reader_never_sees_a_partial_file_while_another_process_rewrites_it(
    store: LocalFolderStorage,
) -> None:
    store.create("big.bin", make_payload("big/initial", 8 << 20))
    writer = _python(REWRITER, str(store.root), "big.bin", "12")
    assert writer.stdout is not None
    assert writer.stdout.readline() == "ready\n"
    versions: set[str] = set()
    reads = 0
    while writer.poll() is None or reads == 0:
        blob = store.read("big.bin")
        assert blob is not None, "the file read as absent while being rewritten"
        assert check_payload(blob.data) is None, check_payload(blob.data)
        versions.add(blob.etag)
        reads += 1
    assert writer.wait(60) == 0
    assert writer.stdout.read() == "done\n"
    assert len(versions) > 1, "the reader never overlapped the writer"


# -- the stripe lock is a real flock across processes --------------------------------------------

LOCK_HOLDER = """
    import fcntl, sys
    with open(sys.argv[1], "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.read()  # hold it until the test closes our stdin
"""


def _waiting_flocks(path: Path) -> list[str]:
    """Lines of /proc/locks for processes blocked waiting on a flock of ``path``."""
    info = os.stat(path)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks") as locks:
        return [line for line in locks if "->" in line and "FLOCK" in line and inode in line]


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
def test_replace_waits_for_the_stripe_lock_held_by_another_process(
    store: LocalFolderStorage,
) -> None:
    etag = store.create("status/r-1.json", b"accepted")
    lock = store.lock_file("status/r-1.json")
    holder = _python(LOCK_HOLDER, str(lock))
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == "locked\n"
    outcome: list[object] = []
    replacer = threading.Thread(
        target=lambda: outcome.append(store.replace("status/r-1.json", b"running", etag))
    )
    replacer.start()
    try:
        # The kernel lists our replace as blocked on the child's flock; nothing else proves it.
        for _ in range(500):
            if _waiting_flocks(lock):
                break
            replacer.join(0.01)
        assert _waiting_flocks(lock), "replace never waited on the lock held by the child"
        assert replacer.is_alive() and not outcome
        assert store.read("status/r-1.json").data == b"accepted"  # type: ignore[union-attr]
    finally:
        holder.stdin.close()
        holder.wait(10)
    replacer.join(10)
    assert len(outcome) == 1
    assert store.read("status/r-1.json").data == b"running"  # type: ignore[union-attr]


# -- a folder that vanishes or turns read-only is unavailable, never "absent" ---------------------


def _every_operation(store: Storage, etag: str) -> dict[str, str]:
    """Each operation's outcome: the exception class name, or what it returned."""
    calls: dict[str, Callable[[], object]] = {
        "read existing": lambda: store.read("requests/r-1.json"),
        "read absent": lambda: store.read("requests/none.json"),
        "create": lambda: store.create("requests/r-2.json", b"{}"),
        "create in new folder": lambda: store.create("runs/r-9/x.json", b"{}"),
        "replace": lambda: store.replace("requests/r-1.json", b"{}", etag),
        "delete": lambda: store.delete("requests/r-1.json", etag),
        "list": lambda: list(store.list("requests/")),
    }
    outcomes = {}
    for name, call in calls.items():
        try:
            result = call()
        except Exception as exc:
            outcomes[name] = type(exc).__name__
        else:
            outcomes[name] = "absent" if result is None else "ok"
    return outcomes


@pytest.mark.parametrize("how", ["removed", "renamed away"])
def test_vanished_folder_is_unavailable(store: LocalFolderStorage, how: str) -> None:
    etag = store.create("requests/r-1.json", b"{}")
    if how == "removed":
        shutil.rmtree(store.root)
    else:
        store.root.rename(store.root.with_name("elsewhere"))
    outcomes = _every_operation(store, etag)
    assert outcomes == dict.fromkeys(outcomes, "StorageUnavailable")
    assert not store.root.exists(), "an operation recreated the vanished folder"


READ_ONLY_CHILD = """
    import json, os, sys
    from pathlib import Path
    sys.path[:0] = json.loads(sys.argv[3])
    from fdcore_localfs import LocalFolderStorage  # import all first: /root may be private
    from test_localfs import _every_operation
    if os.geteuid() == 0:  # permissions do not bind root: act as an ordinary user
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    print(json.dumps(_every_operation(LocalFolderStorage(Path(sys.argv[1])), sys.argv[2])))
"""


def _make_read_only(root: Path, writable: bool) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644 if writable else 0o444)
        os.chmod(folder, 0o755 if writable else 0o555)


def test_read_only_folder_is_unavailable_for_writes() -> None:
    # Not under tmp_path: its parents are private to the test's user, and root runs the child
    # as an ordinary user (permissions do not bind root).
    parent = Path(tempfile.mkdtemp(prefix="fdcore-ro-"))
    try:
        parent.chmod(0o755)
        store = LocalFolderStorage(parent / "env")
        etag = store.create("requests/r-1.json", b"{}")
        _make_read_only(store.root, writable=False)
        here = str(Path(__file__).parent)
        child = _python(READ_ONLY_CHILD, str(store.root), etag, json.dumps([here]))
        out, _ = child.communicate(timeout=60)
        assert child.returncode == 0
        outcomes = json.loads(out)
    finally:
        _make_read_only(parent, writable=True)
        shutil.rmtree(parent)
    assert outcomes == {
        "read existing": "ok",
        "read absent": "absent",  # it truly is absent: the folder is there and readable
        "create": "StorageUnavailable",
        "create in new folder": "StorageUnavailable",
        "replace": "StorageUnavailable",
        "delete": "StorageUnavailable",
        "list": "ok",
    }


# -- folders ---------------------------------------------------------------------------------------


def test_delete_removes_the_folders_it_empties(store: LocalFolderStorage) -> None:
    etag = store.create("runs/r-1/a/b.json", b"{}")
    store.create("runs/r-2.json", b"{}")
    store.delete("runs/r-1/a/b.json", etag)
    assert sorted(p.name for p in (store.root / "runs").iterdir()) == ["r-2.json"]
    store.delete("runs/r-2.json")
    assert not (store.root / "runs").exists()
    assert store.root.is_dir()


CREATE_DELETE = """
    import sys
    from pathlib import Path
    from fdcore_localfs import LocalFolderStorage

    store = LocalFolderStorage(Path(sys.argv[1]))
    for n in range(int(sys.argv[3])):
        key = f"runs/shared/w{sys.argv[2]}-{n}.json"
        store.delete(key, store.create(key, b"{}"))
    print("done", flush=True)
"""


def test_creates_survive_deletes_pruning_their_folder(store: LocalFolderStorage) -> None:
    # Each delete of the folder's last key removes the folder while other processes create in it.
    workers = [_python(CREATE_DELETE, str(store.root), str(n), "150") for n in range(4)]
    outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 4
    assert outputs == ["done\n"] * 4
    assert list(store.list()) == []


def test_a_key_cannot_also_be_a_folder(store: LocalFolderStorage) -> None:
    store.create("a/x", b"{}")
    with pytest.raises(InvalidKey, match="folder of other keys"):
        store.create("a", b"{}")
    with pytest.raises(InvalidKey, match="folder on its path is a key"):
        store.create("a/x/y", b"{}")
    assert store.read("a") is None


# -- opening ---------------------------------------------------------------------------------------


def test_opening_without_create_needs_the_folder_and_writes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(EnvironmentNotFound) as raised:
        LocalFolderStorage(missing, create=False)
    assert str(raised.value) == (
        f"environment not found: {missing.as_uri()} (no folder {missing}); "
        f"`fdcore init {missing.as_uri()}` creates it (or an agent with `[agent] create = true`)"
    )
    assert not missing.exists()
    plain = tmp_path / "plain"  # a folder, but no environment: an empty mount point, say
    plain.mkdir()
    with pytest.raises(EnvironmentNotFound, match=r"folder .*/plain holds none \(no \.fdcore/\)"):
        LocalFolderStorage(plain, create=False)
    assert list(plain.iterdir()) == []
    fresh = LocalFolderStorage(tmp_path / "fresh")  # set up, never used: an empty environment
    opened = LocalFolderStorage(tmp_path / "fresh", create=False)
    assert opened.read("requests/r-1.json") is None and list(opened.list()) == []
    assert [p.name for p in (tmp_path / "fresh").iterdir()] == [".fdcore"]
    fresh.close()
    LocalFolderStorage(tmp_path / "env").create("requests/r-1.json", b"{}")
    assert list(LocalFolderStorage(tmp_path / "env", create=False).list()) == ["requests/r-1.json"]


@pytest.mark.parametrize("create", [True, False])
def test_a_file_where_the_folder_belongs_is_unusable(tmp_path: Path, create: bool) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    for root in (a_file, a_file / "env"):
        with pytest.raises(EnvironmentUnusable) as raised:
            LocalFolderStorage(root, create=create)
        assert str(raised.value) == (
            f"cannot use environment {root.as_uri()}: {a_file} is a file, not a folder"
        )
    assert a_file.read_text() == "not a folder"


def test_a_folder_that_vanishes_after_opening_without_create_is_unavailable(
    tmp_path: Path,
) -> None:
    root = tmp_path / "env"
    LocalFolderStorage(root)
    opened = LocalFolderStorage(root, create=False)
    shutil.rmtree(root)
    with pytest.raises(StorageUnavailable):
        opened.read("requests/r-1.json")
    with pytest.raises(StorageUnavailable):
        list(opened.list())
    assert not root.exists()


# -- URLs ----------------------------------------------------------------------------------------


def test_url_forms_open_the_same_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "with space"
    plugins = load_plugins()
    first = plugins.open_storage(root.as_uri())  # file:///.../with%20space
    first.create("requests/r-1.json", b"hello")
    monkeypatch.chdir(tmp_path)
    for url in (
        f"file://{root}",
        f"file://localhost{root}",
        str(root),
        "with space",
        "./with space",
    ):
        opened = plugins.open_storage(url)
        blob = opened.read("requests/r-1.json")
        assert blob is not None and blob.data == b"hello", url
        assert isinstance(opened, LocalFolderStorage) and opened.root == root, url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file://otherhost/x", "a file:// URL must name a local path"),
        ("file://", "a file:// URL needs a path"),
    ],
)
def test_bad_file_url_is_a_one_line_config_error(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_plugins().open_storage(url)
    assert str(caught.value).startswith(f"{url}: {message}")
    assert "\n" not in str(caught.value)


def test_an_empty_url_is_refused_rather_than_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for create in (True, False):
        with pytest.raises(
            ConfigError, match=r"^'': an environment URL or path must not be empty$"
        ):
            load_plugins().open_storage("", create=create)
    assert list(tmp_path.iterdir()) == []
