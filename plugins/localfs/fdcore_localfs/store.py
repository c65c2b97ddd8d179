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
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from fdcore.errors import ConfigError
from fdcore.storage import (
    AlreadyExists,
    Blob,
    InvalidKey,
    NotFound,
    PreconditionFailed,
    StorageError,
    StorageUnavailable,
    validate_key,
    validate_prefix,
)

INTERNAL = ".fdcore"  # scratch files and lock stripes; dot names are never keys
LOCK_STRIPES = 256
# Errors that say the folder is not usable right now (read-only, gone, full, flaky disk).
_UNAVAILABLE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EIO, errno.ESTALE}


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
    return Path(url).absolute()


def _etag(data: bytes, stat: os.stat_result) -> str:
    digest = hashlib.blake2b(data, digest_size=8).hexdigest()
    return f'"{stat.st_ino:x}-{stat.st_mtime_ns:x}-{digest}"'


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalFolderStorage:
    """The :class:`fdcore.storage.Storage` protocol over a folder."""

    def __init__(self, root: Path, url: str | None = None) -> None:
        self.root = Path(root)
        self.url = url or self.root.as_uri()
        self._internal = self.root / INTERNAL
        try:
            (self._internal / "tmp").mkdir(parents=True, exist_ok=True)
            (self._internal / "locks").mkdir(exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(None, f"cannot use folder {self.root}: {exc}") from None

    # -- helpers -------------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        return self.root / validate_key(key)

    def _unavailable(self, key: str | None, exc: OSError) -> StorageError:
        if exc.errno == errno.ENAMETOOLONG:
            return InvalidKey(key, "name too long for this file system")
        return StorageUnavailable(key, f"folder {self.root} unusable: {exc.strerror or exc}")

    def _check_root(self, key: str) -> None:
        # A vanished environment must not read as an empty one: agents would recreate its files.
        if not self._internal.is_dir():
            raise StorageUnavailable(key, f"folder {self.root} is missing or not initialised")

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=2).digest(), "big")
        lock_path = self._internal / "locks" / f"{stripe % LOCK_STRIPES:03d}.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
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
            etag = _etag(data, os.fstat(fd))
        except BaseException:
            os.close(fd)
            scratch.unlink(missing_ok=True)
            raise
        os.close(fd)
        return scratch, etag

    def _read_path(self, path: Path, key: str) -> Blob | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
                return Blob(data, _etag(data, os.fstat(handle.fileno())))
        except (FileNotFoundError, NotADirectoryError):
            self._check_root(key)
            return None
        except IsADirectoryError:
            return None
        except OSError as exc:
            raise self._unavailable(key, exc) from None

    # -- the protocol --------------------------------------------------------------------------

    def read(self, key: str) -> Blob | None:
        return self._read_path(self._path(key), key)

    def create(self, key: str, data: bytes) -> str:
        path = self._path(key)
        self._check_root(key)
        scratch: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch, etag = self._write_scratch(data)
            try:
                os.link(scratch, path)
            except FileExistsError:
                raise AlreadyExists(key, "already exists") from None
            _fsync_dir(path.parent)
            return etag
        except OSError as exc:
            raise self._unavailable(key, exc) from None
        finally:
            if scratch is not None:
                with contextlib.suppress(OSError):
                    scratch.unlink()

    def replace(self, key: str, data: bytes, etag: str) -> str:
        path = self._path(key)
        try:
            with self._locked(key):
                current = self._read_path(path, key)
                if current is None:
                    raise NotFound(key, "does not exist")
                if current.etag != etag:
                    raise PreconditionFailed(key, f"etag {etag} is stale (now {current.etag})")
                scratch, new_etag = self._write_scratch(data)
                try:
                    os.replace(scratch, path)
                except BaseException:
                    scratch.unlink(missing_ok=True)
                    raise
                _fsync_dir(path.parent)
                return new_etag
        except OSError as exc:
            raise self._unavailable(key, exc) from None

    def delete(self, key: str, etag: str | None = None) -> None:
        path = self._path(key)
        try:
            with self._locked(key):
                current = self._read_path(path, key)
                if current is None:
                    raise NotFound(key, "does not exist")
                if etag is not None and current.etag != etag:
                    raise PreconditionFailed(key, f"etag {etag} is stale (now {current.etag})")
                path.unlink()
                _fsync_dir(path.parent)
        except OSError as exc:
            raise self._unavailable(key, exc) from None

    def list(self, prefix: str = "") -> Iterator[str]:
        validate_prefix(prefix)
        folder, _, _ = prefix.rpartition("/")
        start = self.root / folder if folder else self.root
        self._check_root(prefix or ".")
        keys: builtins.list[str] = []
        try:
            self._walk(start, folder, prefix, keys)
        except OSError as exc:
            raise self._unavailable(prefix or None, exc) from None
        keys.sort()
        return iter(keys)

    def _walk(self, directory: Path, relative: str, prefix: str, keys: builtins.list[str]) -> None:
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            key = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                if key.startswith(prefix) or prefix.startswith(key + "/"):
                    self._walk(Path(entry.path), key, prefix, keys)
            elif key.startswith(prefix):
                keys.append(key)

    def close(self) -> None:
        pass
