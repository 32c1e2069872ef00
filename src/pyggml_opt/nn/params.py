"""The parameters of a model as ggml tensors in one backend buffer."""
from __future__ import annotations

import numpy as np

from .._lib import ffi, lib
from ..core import Backend, Buffer, Context
from ..core import tensor_data
from .ops import Tensor


MAX_NAME = 64  # GGML_MAX_NAME: ggml_tensor.name is char[64]


class ParamStore:
    """Owns a context with one F32 tensor per parameter and the buffer holding them on ``backend``.

    Tensor names are the parameter names (they become the GGUF tensor names). ``tensors`` maps
    name -> Tensor (numpy-order shapes).
    """

    def __init__(self, shapes: dict[str, tuple[int, ...]], backend: Backend) -> None:
        self.ctx = Context(max(1, len(shapes)))
        self.tensors: dict[str, Tensor] = {}
        for name, shape in shapes.items():
            ne = tensor_data.ne_of(shape)
            t = lib.ggml_new_tensor(self.ctx.ptr, lib.GGML_TYPE_F32, lib.GGML_MAX_DIMS, ffi.new("int64_t[4]", ne))
            if len(name.encode()) >= MAX_NAME:
                raise ValueError(f"parameter name {name!r} is too long for ggml (at most 63 bytes)")
            lib.ggml_set_name(t, name.encode())
            self.tensors[name] = Tensor(t, None, self.ctx, len(shape))
        # ggml allocates no buffer for a context without tensors (a model without parameters)
        self.buffer = Buffer(self.ctx, backend) if self.tensors else None
        self.backend = backend

    def get(self) -> dict[str, np.ndarray]:
        return {name: tensor_data.get(t.ptr, t.ndim) for name, t in self.tensors.items()}

    def set(self, weights: dict[str, np.ndarray]) -> None:
        for name, value in weights.items():
            tensor_data.set(self.tensors[name].ptr, value)

    def mark_trainable(self) -> None:
        for t in self.tensors.values():
            lib.ggml_set_param(t.ptr)

    def close(self) -> None:
        if self.buffer is not None:
            self.buffer.close()
        self.ctx.close()
