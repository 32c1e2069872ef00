"""Normalisation over the last axis."""
from __future__ import annotations

from ..._lib import lib
from .reductions import mean
from .tensor import Tensor, check_tensor, cont, exp, graph_context, log, mul, scale, sqr, sub, wrap


def layer_norm(a: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalise over the last (numpy) axis to zero mean and unit variance (no affine part)."""
    centered = sub(a, mean(a))
    var = mean(sqr(centered))
    inv_std = exp(scale(log(scale(var, 1.0, eps)), -0.5))  # (var + eps)^-1/2 with differentiable ops
    return mul(centered, inv_std)


def rms_norm(a: Tensor, eps: float = 1e-6) -> Tensor:
    """a / sqrt(mean(a^2) + eps) over the last (numpy) axis (ggml_rms_norm, which ggml differentiates)."""
    check_tensor("a", a)
    src = a if lib.ggml_is_contiguous(a.ptr) else cont(a)
    return wrap(lib.ggml_rms_norm(graph_context(src).ptr, src.ptr, float(eps)), src)
