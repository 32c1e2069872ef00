"""ggml_opt_result: loss and accuracy accumulated over batches."""
from __future__ import annotations

from .._lib import ffi, lib
from .handle import Handle


class Result(Handle):
    """Owns a ``ggml_opt_result_t``. ``loss``/``accuracy`` return (value, uncertainty); NaN where
    ggml-opt has nothing to report (no accuracy without a cross-entropy loss)."""

    _kind = "ggml-opt result"

    def __init__(self) -> None:
        super().__init__(lib.ggml_opt_result_init(), lib.ggml_opt_result_free)

    def reset(self) -> None:
        lib.ggml_opt_result_reset(self.ptr)

    @property
    def ndata(self) -> int:
        n = ffi.new("int64_t *")
        lib.ggml_opt_result_ndata(self.ptr, n)
        return int(n[0])

    def loss(self) -> tuple[float, float]:
        v, u = ffi.new("double *"), ffi.new("double *")
        lib.ggml_opt_result_loss(self.ptr, v, u)
        return float(v[0]), float(u[0])

    def accuracy(self) -> tuple[float, float]:
        v, u = ffi.new("double *"), ffi.new("double *")
        lib.ggml_opt_result_accuracy(self.ptr, v, u)
        return float(v[0]), float(u[0])
