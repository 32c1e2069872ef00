"""ggml tensors over numpy arrays' own memory: the host backend reads the arrays in place."""
from __future__ import annotations

import numpy as np

from .._lib import CData, ffi, lib
from .context import Context
from .handle import Handle

# ggml_backend_cpu_buffer_from_ptr asserts a base aligned to TENSOR_ALIGNMENT (ggml-impl.h); numpy's
# large arrays often start 16 bytes into a page
_ALIGNMENT = 32
_TYPES = {np.dtype(np.float32): lib.GGML_TYPE_F32, np.dtype(np.int32): lib.GGML_TYPE_I32}


def _address(array: np.ndarray) -> int:
    return int(ffi.cast("uintptr_t", ffi.from_buffer(array)))


class HostBuffer(Handle):
    """Owns a CPU backend buffer over the memory of ``array`` (C-contiguous, read-only ones included: a
    file mapped by ``GGUFFile``) without copying it; ``place`` gives a tensor the memory of a part of it.
    The buffer's base is rounded down to the alignment ggml asserts; the bytes before the array are never
    read or written (the buffer is only used through the tensors placed in it, never cleared). The
    object keeps ``array`` alive; whoever uses the tensors relies on it not being resized or freed
    while they do, as with ``torch.from_numpy``. ggml writes a tensor placed over read-only memory only
    where it is told to (a parameter being trained, ``ggml_backend_tensor_set``): its owner never does."""

    _kind = "host buffer"

    def __init__(self, array: np.ndarray) -> None:
        if not array.flags.c_contiguous:
            raise ValueError(f"HostBuffer needs a C-contiguous array, got one of shape {array.shape}")
        self._start = _address(array)
        self._end = self._start + array.nbytes
        base = self._start - self._start % _ALIGNMENT
        ptr = lib.ggml_backend_cpu_buffer_from_ptr(ffi.cast("void *", base), self._end - base)
        super().__init__(ptr, lib.ggml_backend_buffer_free, array)
        self.array = array

    def place(self, tensor: CData, part: np.ndarray) -> None:
        """Give ``tensor`` the memory of ``part``, a C-contiguous piece of the buffer's array holding
        exactly the tensor's bytes (ValueError otherwise)."""
        addr = _address(part)
        if not part.flags.c_contiguous or not self._start <= addr <= addr + part.nbytes <= self._end:
            raise ValueError("the array to place a tensor on is not a contiguous part of the buffer's memory")
        if part.nbytes != lib.ggml_nbytes(tensor):
            raise ValueError(f"{part.nbytes} bytes cannot hold a tensor of {lib.ggml_nbytes(tensor)} bytes")
        if lib.ggml_backend_tensor_alloc(self.ptr, tensor, ffi.cast("void *", addr)) != lib.GGML_STATUS_SUCCESS:
            raise MemoryError("pyggml_opt: ggml could not place a tensor on the array's memory")


class ArrayBuffer(HostBuffer):
    """A ``HostBuffer`` over ``array`` (C-contiguous, 2-d, float32 or int32) with the one tensor
    ``tensor`` (``[cols, rows]``) viewing the whole of it."""

    _kind = "array buffer"

    def __init__(self, array: np.ndarray) -> None:
        if array.ndim != 2 or not array.flags.c_contiguous or array.dtype not in _TYPES:
            raise ValueError(f"ArrayBuffer needs a C-contiguous 2-d float32 or int32 array, got {array.dtype} "
                             f"{array.shape} (contiguous: {array.flags.c_contiguous})")
        super().__init__(array)
        self.context = Context(1)
        rows, cols = array.shape
        self.tensor = lib.ggml_new_tensor_2d(self.context.ptr, _TYPES[array.dtype], cols, rows)
        self.place(self.tensor, array)
