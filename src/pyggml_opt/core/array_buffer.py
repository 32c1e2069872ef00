"""A ggml tensor over a numpy array's own memory: the host backend reads the array in place."""
from __future__ import annotations

import numpy as np

from .._lib import ffi, lib
from .context import Context
from .handle import Handle

# ggml_backend_cpu_buffer_from_ptr asserts a base aligned to TENSOR_ALIGNMENT (ggml-impl.h); numpy's
# large arrays often start 16 bytes into a page
_ALIGNMENT = 32
_TYPES = {np.dtype(np.float32): lib.GGML_TYPE_F32, np.dtype(np.int32): lib.GGML_TYPE_I32}


class ArrayBuffer(Handle):
    """Owns a CPU backend buffer over the memory of ``array`` (C-contiguous, 2-d, float32 or int32) and
    the one tensor ``tensor`` (``[cols, rows]``) viewing it: no copy. The buffer's base is rounded down
    to the alignment ggml asserts; the bytes before the array are never read or written (the buffer is
    only read through ``tensor``, never cleared). The object keeps ``array`` alive; whoever reads the
    tensor relies on the array not being resized or freed while it does, as with ``torch.from_numpy``.
    """

    _kind = "array buffer"

    def __init__(self, array: np.ndarray) -> None:
        if array.ndim != 2 or not array.flags.c_contiguous or array.dtype not in _TYPES:
            raise ValueError(f"ArrayBuffer needs a C-contiguous 2-d float32 or int32 array, got {array.dtype} "
                             f"{array.shape} (contiguous: {array.flags.c_contiguous})")
        addr = int(ffi.cast("uintptr_t", ffi.from_buffer(array)))
        base = addr - addr % _ALIGNMENT
        ptr = lib.ggml_backend_cpu_buffer_from_ptr(ffi.cast("void *", base), array.nbytes + addr - base)
        context = Context(1)
        super().__init__(ptr, lib.ggml_backend_buffer_free, context, array)
        self.context, self.array = context, array
        rows, cols = array.shape
        self.tensor = lib.ggml_new_tensor_2d(context.ptr, _TYPES[array.dtype], cols, rows)
        if lib.ggml_backend_tensor_alloc(ptr, self.tensor, ffi.cast("void *", addr)) != lib.GGML_STATUS_SUCCESS:
            raise MemoryError("pyggml_opt: ggml could not place a tensor on the array's memory")
