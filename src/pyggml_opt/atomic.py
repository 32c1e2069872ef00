"""Files that appear complete or not at all: written under a temporary name in the same folder, then
renamed over the target (a reader never sees half a file; a failed write leaves no trace)."""
from __future__ import annotations

import os
import secrets
from contextlib import contextmanager, suppress
from typing import BinaryIO, Iterator


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A fresh temporary path beside ``path``: renamed to ``path`` when the block succeeds, removed when
    it fails. Created with the default permissions (the umask's), as the final file would be."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file open for writing that appears at ``path`` only once written completely."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        yield f
