"""The IDX file format (Yann LeCun's MNIST format, gzipped or not): read and write numpy arrays.

An IDX file is a 4-byte magic (00 00, a type code, the number of dimensions), the dimensions as
big-endian uint32, then the data in C order, big-endian. This module depends on numpy and the
standard library only.
"""
from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ..atomic import atomic_file

PathLike = Union[str, "os.PathLike[str]"]

_GZIP_MAGIC = b"\x1f\x8b"

# IDX type code -> big-endian numpy dtype as stored in the file.
_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {(dt.kind, dt.itemsize): code for code, dt in _IDX_DTYPES.items()}


# --------------------------------------------------------------------------------------------------
# IDX format
# --------------------------------------------------------------------------------------------------

def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _read_exact(f: io.BufferedIOBase, n: int) -> bytes:
    """Read n bytes or fewer at end of stream (loops: a compressed stream may return short reads)."""
    chunks = []
    while n > 0:
        chunk = f.read(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _readinto_exact(f: io.BufferedIOBase, view: memoryview) -> int:
    got = 0
    total = len(view)
    while got < total:
        n = f.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def read_idx(path: PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST container format) into a numpy array.

    The file may be gzip-compressed or raw; this is detected from its first two bytes (1f 8b), not
    from its name. Layout: magic ``00 00 TT NN`` (TT: element type, NN: number of dimensions), then NN
    big-endian uint32 sizes (outermost first), then the elements, big-endian, row-major.

    Element types: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64.

    Args:
        path: the file to read.

    Returns:
        A new, writable array of shape ``(d0, d1, ..., d{NN-1})`` with the matching dtype in native
        byte order (``()`` with one element when NN = 0).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: bad magic, unknown element type, truncated header or data, trailing bytes after
            the data (size mismatch), or a corrupt gzip stream; the message names the file.
    """
    path = Path(path)
    gz = is_gzip(path)
    opener = gzip.open if gz else open
    try:
        with opener(path, "rb") as f:
            magic = _read_exact(f, 4)
            if len(magic) < 4:
                raise ValueError(f"{path}: truncated IDX file: {len(magic)} bytes, no complete magic number")
            if magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_DTYPES:
                raise ValueError(
                    f"{path}: not an IDX file: bad magic number {magic.hex(' ')} "
                    f"(expected 00 00 TT NN with TT in {', '.join(f'{c:02x}' for c in _IDX_DTYPES)})"
                )
            dtype = _IDX_DTYPES[magic[2]]
            ndim = magic[3]
            dims_raw = _read_exact(f, 4 * ndim)
            if len(dims_raw) < 4 * ndim:
                raise ValueError(f"{path}: truncated IDX header: {ndim} dimensions announced, "
                                 f"only {len(dims_raw)} of {4 * ndim} size bytes present")
            shape = struct.unpack(f">{ndim}I", dims_raw)
            out = np.empty(shape, dtype=dtype)
            nbytes = out.nbytes
            got = _readinto_exact(f, out.reshape(-1).view(np.uint8).data)
            if got < nbytes:
                raise ValueError(f"{path}: truncated IDX data: shape {shape} of {dtype.name} needs "
                                 f"{nbytes} bytes, file holds {got}")
            extra = f.read(1)
            if extra:
                rest = 1 + len(f.read())
                raise ValueError(f"{path}: IDX size mismatch: {rest} bytes after the data of shape "
                                 f"{shape} ({dtype.name}, {nbytes} bytes)")
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise ValueError(f"{path}: corrupt or truncated gzip stream: {e}") from e
    if dtype.itemsize > 1:
        out = out.astype(dtype.newbyteorder("="), copy=False)
    else:
        out = out.view(dtype.newbyteorder("="))
    return out


def write_idx(path: PathLike, array: np.ndarray, *, compress: Optional[bool] = None) -> Path:
    """Write an array as an IDX file (see :func:`read_idx` for the layout).

    Args:
        path: the file to write (replaced if present; written to a temporary file and renamed, so a
            reader never sees a partial file).
        array: any array of dtype uint8, int8, int16, int32, float32 or float64 with at most 255
            dimensions, each below 2**32. Written big-endian, row-major.
        compress: gzip the file; None (default) gzips exactly when the name ends in ``.gz``. The
            gzip header carries no time stamp, so equal arrays give byte-identical files.

    Returns:
        The path written.

    Raises:
        ValueError: unsupported dtype, too many dimensions, or a dimension too large.
    """
    path = Path(path)
    a = np.asarray(array)
    code = _IDX_CODES.get((a.dtype.kind, a.dtype.itemsize))
    if code is None:
        raise ValueError(f"{path}: IDX cannot store dtype {a.dtype} "
                         "(supported: uint8, int8, int16, int32, float32, float64)")
    if a.ndim > 255:
        raise ValueError(f"{path}: IDX stores at most 255 dimensions, got {a.ndim}")
    if any(d >= 2**32 for d in a.shape):
        raise ValueError(f"{path}: IDX dimension sizes must be < 2**32, got shape {a.shape}")
    if compress is None:
        compress = path.name.endswith(".gz")
    header = bytes((0, 0, code, a.ndim)) + struct.pack(f">{a.ndim}I", *a.shape)
    data = np.ascontiguousarray(a, dtype=_IDX_DTYPES[code]).tobytes()

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as raw:
        if compress:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
                f.write(header)
                f.write(data)
        else:
            raw.write(header)
            raw.write(data)
    return path
