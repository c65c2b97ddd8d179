"""A mailbox in a local folder.

* create-if-absent writes the value to a scratch file, fsyncs it, and hard-links it into place:
  ``link`` fails if the name exists, so exactly one creator wins, and a reader sees either no
  file or the complete one.
* replace-if-unchanged runs under an exclusive ``flock`` (one of 256 lock stripes per folder):
  compare the etag, write a scratch file, fsync, ``rename`` over the old one.
* The folder is fsynced after each link, rename and unlink, so an acknowledged write survives a
  crash of the machine.

Files are never modified in place, so an etag made from the inode, the modification time and a
hash of the content names one version. Safe across processes on one machine; on a network file
system only where ``link``, ``rename`` and ``flock`` are honest (see docs/plugins.md).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlsplit

from fdcore.abc import (
    MAX_KEY_LENGTH,
    Blob,
    Listed,
    ListedChanges,
    check_precondition,
    validate_key,
    validate_prefix,
)
from fdcore.errors import (
    AlreadyExists,
    ConfigError,
    EnvironmentNotFound,
    EnvironmentUnusable,
    InvalidKey,
    StorageError,
    StorageUnavailable,
    UnreadableFile,
)
from fdcore_localfs.changes import CHANGES
from fdcore_localfs.watch import watch_folder

INTERNAL = ".fdcore"  # scratch files and lock stripes; dot names are never keys
LOCK_STRIPES = 256
LINK_ATTEMPTS = 20  # a create retries while concurrent deletes prune the folder it links into
# A versioned listing hashes a file it has not seen in this version (the etag holds a hash of
# the content) only up to this size; a bigger one gets an etag no read returns, so a reader
# reads it (and a bounded read refuses it).
LISTED_HASH_BOUND = 16 << 20
LISTED_MEMORY = 200_000  # versions a store remembers from its listings before it starts over
# A version is remembered only once its times are this much in the past ("racy git"): a file
# written in the same clock tick as the one before it, on a reused inode, can match its stat.
SETTLED_NS = 2_000_000_000


def path_from_url(url: str) -> Path:
    """``file:///srv/fd`` or ``/srv/fd`` or ``./fd`` to an absolute path."""
    if url.startswith("file://"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(url, None, "a file:// URL must name a local path (file:///path)")
        path = unquote(parts.path)
        if not path:
            raise ConfigError(url, None, "a file:// URL needs a path")
        return Path(path)
    if not url.strip():  # Path("") is the working folder: never an environment by accident
        raise ConfigError(repr(url), None, "an environment URL or path must not be empty")
    return Path(url).absolute()


def _etag(data: bytes, stat: os.stat_result) -> str:
    digest = hashlib.blake2b(data, digest_size=8).hexdigest()
    return f'"{stat.st_ino:x}-{stat.st_mtime_ns:x}-{digest}"'


def _unread_etag(found: os.stat_result) -> str:
    """The etag a listing gives a file it did not read: never equal to a read's."""
    return f'"{found.st_ino:x}-{found.st_mtime_ns:x}-unread"'


def _signature(found: os.stat_result) -> tuple[int, int, int, int]:
    """What changes with every version of a file (a replace links a new inode, an edit in
    place moves the times or the size)."""
    return (found.st_ino, found.st_mtime_ns, found.st_ctime_ns, found.st_size)


def _mode(path: Path) -> int | None:
    """The file type bits of ``path`` (``stat.S_IFDIR`` for a folder), None if unreachable."""
    try:
        return stat.S_IFMT(os.stat(path).st_mode)
    except OSError:
        return None


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    kinds = [
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "a special file")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return  # a concurrent delete pruned the folder: nothing left in it to make durable
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalFolderStorage:
    """The :class:`fdcore.abc.Storage` protocol over a folder.

    ``create=True`` makes the folder (and its parents) if missing and sets up ``.fdcore``.
    ``create=False`` writes nothing: the environment must exist, a folder with ``.fdcore`` set
    up (by ``fdcore init``, an agent with ``[agent] create = true``, or any earlier version's
    agent); a missing folder, or one that holds no environment, is EnvironmentNotFound. So a
    mistyped path, or a share's empty mount point, is never taken for an empty environment.
    """

    def __init__(self, root: Path, url: str | None = None, *, create: bool = True) -> None:
        self.root = Path(root)
        self.url = url or self.root.as_uri()
        self._internal = self.root / INTERNAL
        self._scratch_time: datetime | None = None
        self._write_time: datetime | None = None  # of the last create or replace that landed
        # versions (etags) a versioned listing worked out, by key, with the stat they belong to
        self._listed: dict[str, tuple[tuple[int, int, int, int], Listed]] = {}
        self._open_root(create)
        # What must still be a folder for the environment not to have vanished (_check_root):
        # ``.fdcore`` tells a mounted share from the empty mount point, the root is all a
        # folder that was never set up has.
        self._sentinel = self._internal if _mode(self._internal) == stat.S_IFDIR else self.root

    def _open_root(self, create: bool) -> None:
        try:
            mode: int | None = os.stat(self.root).st_mode
        except FileNotFoundError:
            if not create:
                raise EnvironmentNotFound(self.url, f"no folder {self.root}") from None
            mode = None
        except OSError as exc:
            raise self._unusable_root(exc) from None
        if mode is not None and not stat.S_ISDIR(mode):
            raise EnvironmentUnusable(self.url, f"{self.root} is a file, not a folder")
        try:
            if create:
                (self._internal / "tmp").mkdir(parents=True, exist_ok=True)
                (self._internal / "locks").mkdir(exist_ok=True)
            else:
                os.scandir(self.root).close()  # readable, or every listing would fail later
        except OSError as exc:
            raise self._unusable_root(exc) from None
        if not create and _mode(self._internal) != stat.S_IFDIR:
            raise EnvironmentNotFound(self.url, f"folder {self.root} holds none (no {INTERNAL}/)")

    def _unusable_root(self, exc: OSError) -> StorageError:
        """What a failure to reach or set up the root at open means to the operator."""
        if exc.errno in (errno.ENOTDIR, errno.EEXIST):  # a file where a folder must be: name it
            on_the_way = (*reversed(self._internal.parents), self._internal)
            path = next((p for p in on_the_way if _mode(p) not in (None, stat.S_IFDIR)), self.root)
            return EnvironmentUnusable(self.url, f"{path} is a file, not a folder")
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return EnvironmentUnusable(self.url, f"folder {self.root}: {exc.strerror}")
        return StorageUnavailable(None, f"cannot use folder {self.root}: {exc.strerror or exc}")

    # -- helpers -------------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        return self.root / validate_key(key)

    def _unavailable(self, key: str | None, exc: OSError) -> StorageError:
        if exc.errno == errno.ENAMETOOLONG:
            return InvalidKey(key, "name too long for this file system")
        return StorageUnavailable(key, f"folder {self.root} unusable: {exc.strerror or exc}")

    def _check_root(self, key: str) -> None:
        # A vanished environment must not read as an empty one: agents would recreate its files.
        try:
            present = stat.S_ISDIR(os.stat(self._sentinel).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            present = False
        except OSError as exc:
            raise self._unavailable(key, exc) from None
        if not present:
            raise StorageUnavailable(key, f"folder {self.root} is missing or not initialised")

    def lock_file(self, key: str) -> Path:
        """The file whose ``flock`` serialises replace and delete of ``key`` across processes."""
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=2).digest(), "big")
        return self._internal / "locks" / f"{stripe % LOCK_STRIPES:03d}.lock"

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        fd = os.open(self.lock_file(key), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _write_scratch(self, data: bytes) -> tuple[Path, str]:
        scratch = self._internal / "tmp" / f"{uuid.uuid4().hex}.part"
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            written = os.fstat(fd)
        except BaseException:
            os.close(fd)
            scratch.unlink(missing_ok=True)
            raise
        os.close(fd)
        # The file system stamps the write by its clock (the server's, on a network share).
        self._scratch_time = datetime.fromtimestamp(written.st_mtime, timezone.utc)
        return scratch, _etag(data, written)

    def _read_path(self, path: Path, key: str, bound: int | None = None) -> Blob | None:
        """Read the regular file at ``path``; a FIFO, device, socket or symbolic link is an
        :class:`UnreadableFile`, found without reading it (a FIFO would block, a link to
        ``/dev/zero`` never ends, a link may leave the environment). With ``bound`` (a mailbox
        read) a folder or a file over ``bound`` bytes is one too; without, a folder is no key."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            self._check_root(key)
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnreadableFile(key, "is a symbolic link, not a file: not followed") from None
            raise self._unavailable(key, exc) from None
        try:
            found = os.fstat(fd)
            if stat.S_ISDIR(found.st_mode) and bound is None:
                return None
            if not stat.S_ISREG(found.st_mode):
                raise UnreadableFile(key, f"is {_kind(found.st_mode)}, not a file: not read")
            if bound is not None and found.st_size > bound:
                raise UnreadableFile(
                    key, f"is {found.st_size} bytes, over the bound of {bound}: not read"
                )
            with os.fdopen(fd, "rb", closefd=False) as handle:
                # One byte past the bound: a file that grew since fstat is caught by the codec.
                data = handle.read() if bound is None else handle.read(bound + 1)
            return Blob(data, _etag(data, found))
        except OSError as exc:
            raise self._unavailable(key, exc) from None
        finally:
            os.close(fd)

    # -- the protocol --------------------------------------------------------------------------

    def read(self, key: str) -> Blob | None:
        return self._read_path(self._path(key), key)

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        """:class:`fdcore.abc.BoundedRead`: a mailbox file, never more than ``max_bytes`` read."""
        return self._read_path(self._path(key), key, max_bytes)

    def unchanged(self, key: str, etag: str) -> bool:
        """:class:`fdcore.abc.ChangeCheck`: whether ``key``'s version is still the one read at
        ``etag``, told as the listing tells it (:meth:`_version`): one ``stat`` for a version
        this store knows, the file hashed again when its inode, times or size moved. An edit
        in place that kept the size and put the modification time back still moves the change
        time, which no one can set back."""
        path = self._path(key)
        try:
            found = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        if not etag.startswith(f'"{found.st_ino:x}-{found.st_mtime_ns:x}-'):
            return False  # a new inode or modification time: changed, without a read
        return self._version(key, str(path), found).etag == etag

    def last_write_time(self) -> datetime | None:
        """:class:`fdcore.abc.StoreClock`: the mtime of the last file this store wrote."""
        return self._write_time

    def create(self, key: str, data: bytes) -> str:
        path = self._path(key)
        self._check_root(key)
        # A create that will lose (a claim another agent made first) costs a stat, not a
        # synced scratch file: ``link`` below still decides every race.
        if _mode(path) not in (None, stat.S_IFDIR):
            raise AlreadyExists(key, "already exists")
        scratch: Path | None = None
        try:
            scratch, etag = self._write_scratch(data)
            for _ in range(LINK_ATTEMPTS):
                try:
                    os.link(scratch, path)
                except FileExistsError:
                    if path.is_dir():
                        raise InvalidKey(key, "is a folder of other keys in this store") from None
                    raise AlreadyExists(key, "already exists") from None
                except FileNotFoundError:
                    # Its folder is missing, or a delete pruned it just now: make it, link again.
                    self._make_parents(key)
                    continue
                except NotADirectoryError:
                    raise self._file_in_the_way(key) from None
                _fsync_dir(path.parent)
                self._write_time = self._scratch_time
                return etag
            raise StorageUnavailable(key, f"its folder kept vanishing under {self.root}")
        except OSError as exc:
            raise self._unavailable(key, exc) from None
        finally:
            if scratch is not None:
                with contextlib.suppress(OSError):
                    scratch.unlink()

    def _make_parents(self, key: str) -> None:
        """Create the folders of ``key`` below the root, never the root itself.

        A root that vanished (an unmounted share, a deleted folder) must stay missing, so the
        next operation reports the store unavailable rather than filling an empty new folder.
        """
        self._check_root(key)
        folder = self.root
        for segment in key.split("/")[:-1]:
            folder = folder / segment
            try:
                folder.mkdir()
            except FileExistsError:
                try:
                    is_folder = stat.S_ISDIR(os.stat(folder).st_mode)
                except FileNotFoundError:
                    return  # pruned between our mkdir and stat: the caller tries again
                if not is_folder:
                    raise self._file_in_the_way(key) from None
            except FileNotFoundError:
                return  # a parent was pruned under us: the caller tries again

    def _file_in_the_way(self, key: str) -> InvalidKey:
        return InvalidKey(key, "a folder on its path is a key in this store")

    def replace(self, key: str, data: bytes, etag: str) -> str:
        path = self._path(key)
        try:
            with self._locked(key):
                check_precondition(key, self._read_path(path, key), etag)
                scratch, new_etag = self._write_scratch(data)
                try:
                    os.replace(scratch, path)
                except BaseException:
                    scratch.unlink(missing_ok=True)
                    raise
                _fsync_dir(path.parent)
                self._write_time = self._scratch_time
                return new_etag
        except OSError as exc:
            raise self._unavailable(key, exc) from None

    def delete(self, key: str, etag: str | None = None) -> None:
        path = self._path(key)
        try:
            with self._locked(key):
                check_precondition(key, self._read_path(path, key), etag)
                path.unlink()
                _fsync_dir(path.parent)
            self._prune(path.parent)
        except OSError as exc:
            raise self._unavailable(key, exc) from None

    def _prune(self, folder: Path) -> None:
        """Remove the folders a delete left empty, up to the root: keys, not folders, are data.

        A create racing this finds its folder gone and makes it again (see ``create``).
        """
        while folder != self.root:
            try:
                folder.rmdir()
            except OSError:
                return  # not empty, or already gone
            folder = folder.parent

    def list(self, prefix: str = "") -> Iterator[str]:
        return iter([key for key, _ in self._entries(prefix)])

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        """:class:`fdcore.abc.VersionedListing`: the listing's pass, with each entry's ``stat``.

        A file's etag holds a hash of its content (so a reused inode stamped in the same clock
        tick is never taken for the old version), which a ``stat`` cannot give: the store hashes
        a file the first time it lists that version and, once its times are two seconds old,
        remembers that version by the file's inode, times and size. A reader that lists again pays
        one ``stat`` per unchanged file.
        """
        listed: builtins.list[Listed] = []
        for key, entry in self._entries(prefix):
            try:
                found = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted since the folder was scanned
            except OSError as exc:
                raise self._unavailable(key, exc) from None
            listed.append(self._version(key, entry.path, found))
        return iter(listed)

    def list_changes(self, prefix: str, cursor: object | None = None) -> ListedChanges:
        """:class:`fdcore.abc.ListingChanges`: for a folder's prefix (``requests/``), what changed
        since ``cursor`` as inotify told it (:mod:`fdcore_localfs.changes`): one ``stat`` per name
        an event concerned, not one per file. The whole listing where the watch cannot tell."""
        validate_prefix(prefix)
        if not prefix.endswith("/"):
            return self._listed_whole(prefix)
        self._check_root(prefix)
        folder = self.root / prefix
        names, cursor = CHANGES.since(folder, cursor)
        if names is None:
            return ListedChanges(cursor, True, list(self.list_versions(prefix)), [])
        listed: builtins.list[Listed] = []
        removed: builtins.list[str] = []
        for name in sorted(set(names)):
            key = prefix + name
            if name.startswith(".") or len(key) > MAX_KEY_LENGTH:
                continue  # never a key (as in the whole listing)
            path = folder / name
            try:
                found = os.stat(path, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                removed.append(key)
                continue
            except OSError as exc:
                raise self._unavailable(key, exc) from None
            if stat.S_ISDIR(found.st_mode):  # a folder now (its watch ends at the next call)
                return self._listed_whole(prefix)
            listed.append(self._version(key, str(path), found))
        return ListedChanges(cursor, False, listed, removed)

    def _listed_whole(self, prefix: str) -> ListedChanges:
        """The whole listing, as an answer of :meth:`list_changes` (a new base, no cursor)."""
        return ListedChanges(None, True, list(self.list_versions(prefix)), [])

    def _version(self, key: str, path: str, found: os.stat_result) -> Listed:
        """The version of ``key`` whose ``stat`` is ``found``: the one known by its inode, times
        and size (the same object: a reader compares it at once), else the file hashed now.
        The one answer to "did this change", for the listing and :meth:`unchanged` alike."""
        known = self._listed.get(key)
        if known is not None and known[0] == _signature(found):
            return known[1]
        etag, found = self._hashed(path, found)
        version = Listed(key, etag, datetime.fromtimestamp(found.st_mtime, timezone.utc))
        if time.time_ns() - max(found.st_mtime_ns, found.st_ctime_ns) > SETTLED_NS:
            if len(self._listed) > LISTED_MEMORY:
                self._listed.clear()
            self._listed[key] = (_signature(found), version)
        return version

    def _hashed(self, path: str, found: os.stat_result) -> tuple[str, os.stat_result]:
        """The etag a read of the file at ``path`` returns now, with the stat it was made from;
        an etag no read returns for what a read refuses or a listing does not read."""
        if not stat.S_ISREG(found.st_mode) or found.st_size > LISTED_HASH_BOUND:
            return _unread_etag(found), found
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return _unread_etag(found), found  # gone or replaced since: the next look tells
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode) or opened.st_size > LISTED_HASH_BOUND:
                return _unread_etag(opened), opened
            with os.fdopen(fd, "rb", closefd=False) as handle:
                return _etag(handle.read(), opened), opened
        except OSError:
            return _unread_etag(found), found
        finally:
            os.close(fd)

    def _entries(self, prefix: str) -> builtins.list[tuple[str, os.DirEntry[str]]]:
        """Every key under ``prefix`` with its directory entry, sorted by key."""
        validate_prefix(prefix)
        folder, _, _ = prefix.rpartition("/")
        start = self.root / folder if folder else self.root
        self._check_root(prefix or ".")
        entries: builtins.list[tuple[str, os.DirEntry[str]]] = []
        try:
            self._walk(start, folder, prefix, entries)
        except OSError as exc:
            raise self._unavailable(prefix or None, exc) from None
        entries.sort(key=lambda pair: pair[0])
        return entries

    def _walk(
        self,
        directory: Path,
        relative: str,
        prefix: str,
        keys: builtins.list[tuple[str, os.DirEntry[str]]],
    ) -> None:
        """Collect the keys under ``directory`` that start with ``prefix``, with their entries.

        Iterative, and never deeper than a key can be long: a stray tree of nested folders
        thousands deep (made by hand or by a runaway script) costs one bounded walk, never a
        RecursionError out of an agent's poll.
        """
        pending = [(directory, relative)]
        while pending:
            directory, relative = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                key = f"{relative}/{entry.name}" if relative else entry.name
                if len(key) > MAX_KEY_LENGTH:
                    continue  # no key is this long: nothing below it can be one either
                if entry.is_dir(follow_symlinks=False):
                    if key.startswith(prefix) or prefix.startswith(key + "/"):
                        pending.append((Path(entry.path), key))
                elif key.startswith(prefix):
                    keys.append((key, entry))

    def watch(self, prefix: str, changed: Callable[[], None], stop: threading.Event) -> None:
        """Call ``changed()`` soon after keys under ``prefix`` appear or go (inotify)."""
        validate_prefix(prefix)
        watch_folder(self.root, prefix, changed, stop)

    def close(self) -> None:
        CHANGES.release(self.root)
