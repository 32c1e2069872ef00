"""Files that appear complete or not at all, and survive a crash once written: every file the package
writes (models, checkpoints, data sets) goes through ``atomic_file``.

The data goes to a temporary file beside the target, ``.<name>.<16 hex digits>.pgo.tmp``, which is
written, flushed, fsync'ed and closed (each error raises), then renamed over the target, and the folder
is fsync'ed so that the rename survives a power loss. Until then the target is untouched: any error, or
an exception in the writer's own code, removes the temporary file and leaves the previous file as it was.

A writer holds an exclusive ``flock`` on its temporary file until it is renamed or removed. A process
killed mid-write leaves its temporary file unlocked, and the next write to the same target removes it;
temporary files of writers still alive (locked) are left alone.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import re
import secrets
import stat
from contextlib import contextmanager, suppress
from typing import Any, BinaryIO, Iterator

_SUFFIX = ".pgo.tmp"
# Names longer than this get a hash in their temporary file's name (a name is at most 255 bytes).
_MAX_STEM = 200
_ATTEMPTS = 10


def _stem(name: str) -> str:
    if len(os.fsencode(name)) <= _MAX_STEM:
        return name
    return "h" + hashlib.sha256(os.fsencode(name)).hexdigest()


def _temp_pattern(name: str) -> re.Pattern[str]:
    """The temporary files of target ``name``: the stem is escaped and the random part has a fixed
    length, so the files of another target never match (``.a.<hex>`` vs ``.a.b.<hex>``)."""
    return re.compile(rf"\.{re.escape(_stem(name))}\.[0-9a-f]{{16}}{re.escape(_SUFFIX)}")


def _remove_stale_temps(path: str) -> None:
    """Remove the temporary files of writes to ``path`` whose writer is gone (killed mid-write: its
    file is no longer locked); files of writers still at work are left."""
    folder, name = os.path.split(path)
    pattern = _temp_pattern(name)
    try:
        entries = [e.name for e in os.scandir(folder) if pattern.fullmatch(e.name)]
    except FileNotFoundError:
        return
    for entry in entries:
        tmp = os.path.join(folder, entry)
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # gone already, or not ours to open
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(tmp)
        except OSError:  # its writer is alive (locked), another cleaner was first, or it is not ours to remove
            pass
        finally:
            os.close(fd)


def _create_locked_temp(folder: str, name: str) -> tuple[str, int]:
    """A new temporary file for target ``name``, open read-write and locked by us. A cleaner may take
    the lock between our O_EXCL create and our flock, and remove the file: then the name no longer
    leads to our inode once we hold the lock, and we try a new name."""
    stem = _stem(name)
    for _ in range(_ATTEMPTS):
        tmp = os.path.join(folder, f".{stem}.{secrets.token_hex(8)}{_SUFFIX}")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            st = os.fstat(fd)
            now = os.stat(tmp, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return tmp, fd
        except (BlockingIOError, FileNotFoundError):  # a cleaner holds it or removed it
            pass
        except BaseException:
            os.close(fd)
            with suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
    raise OSError(errno.EAGAIN, f"could not create a temporary file for {name!r} in {folder!r}: "
                                f"{_ATTEMPTS} tries were each removed by another process")


class _Replacement(io.BufferedWriter):
    """The temporary file, whose errors name the file it is to replace (Python's name no file)."""

    def __init__(self, fd: int, target: str) -> None:
        super().__init__(io.FileIO(fd, "wb"))
        self._target = target

    @contextmanager
    def _naming_target(self) -> Iterator[None]:
        try:
            yield
        except OSError as e:
            if e.filename is None and e.strerror is not None:
                e.filename = self._target
            raise

    def write(self, data: Any) -> int:
        with self._naming_target():
            return super().write(data)

    def flush(self) -> None:
        with self._naming_target():
            super().flush()

    def sync(self) -> None:
        """Flush to the disk (closing, which may fail too, remains)."""
        with self._naming_target():
            super().flush()
            _fsync(self.fileno())

    def close(self) -> None:
        with self._naming_target():
            super().close()


def _fsync(fd: int) -> None:
    """fsync; on macOS, whose fsync leaves the data in the drive's cache, F_FULLFSYNC (where the file
    system has it)."""
    full_fsync = getattr(fcntl, "F_FULLFSYNC", None)
    if full_fsync is not None:
        try:
            fcntl.fcntl(fd, full_fsync)
            return
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.ENOTTY):
                raise
    os.fsync(fd)


def _fsync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _fsync(fd)
    except OSError as e:
        # Some file systems cannot fsync a folder (EINVAL), and have nothing to flush for it.
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file open for writing that replaces ``path`` only once written completely and synced
    to disk; an existing file's permission bits are kept (a new one gets the umask's default).

    Any error (a full disk, an I/O error at close) or exception in the block raises, removes the
    temporary file and leaves ``path`` as it was. An error fsync'ing the folder after the rename
    raises too, though ``path`` then already holds the new data.
    """
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    _remove_stale_temps(path)
    tmp, lock_fd = _create_locked_temp(folder, name)
    try:
        if mode is not None and stat.S_IMODE(os.fstat(lock_fd).st_mode) != mode:
            os.fchmod(lock_fd, mode)
        # Written through a duplicate, so that closing it (and checking that close) keeps the lock,
        # which is held on the shared open file until lock_fd is closed too, after the rename.
        f = _Replacement(os.dup(lock_fd), path)
        try:
            yield f
            f.sync()
        except BaseException:
            with suppress(OSError):
                f.close()
            raise
        f.close()
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        os.close(lock_fd)
        raise
    os.close(lock_fd)
    _fsync_folder(folder)
