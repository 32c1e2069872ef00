"""Normalisation: over the last axis (layer norm, RMS norm), and per channel over the batch (batch norm)."""
from __future__ import annotations

import math
from collections.abc import Callable

from ..._lib import CData, ffi, lib
from .shape import reshape
from .tensor import Tensor, check_tensor, contiguous, graph_context, wrap


def layer_norm(a: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalise over the last (numpy) axis to zero mean and unit variance (no affine part):
    ggml_norm, one graph node (its backward pass is vendor patch 0020's)."""
    return _over_rows(lib.ggml_norm, a, eps)


def rms_norm(a: Tensor, eps: float = 1e-6) -> Tensor:
    """a / sqrt(mean(a^2) + eps) over the last (numpy) axis (ggml_rms_norm, which ggml differentiates)."""
    return _over_rows(lib.ggml_rms_norm, a, eps)


def _over_rows(op: Callable[[CData, CData, float], CData], a: Tensor, eps: float) -> Tensor:
    """ggml's row normalisations on a contiguous copy (their backward passes read rows in place)."""
    check_tensor("a", a)
    src = contiguous(a)
    return wrap(op(graph_context(src).ptr, src.ptr, float(eps)), src)


def _check_batch_norm(x: Tensor, per_channel: dict[str, Tensor | None]) -> int:
    check_tensor("x", x)
    if not 2 <= x.ndim <= 4:
        raise ValueError(f"batch_norm: x must be (N, C), (N, C, L) or (N, C, H, W), got shape {x.shape}")
    channels = x.shape[1]
    for name, t in per_channel.items():
        if t is not None:
            check_tensor(name, t)
            if t.shape != (channels,):
                raise ValueError(f"batch_norm: {name} must have shape ({channels},) (one value per channel of x "
                                 f"{x.shape}), got {t.shape}")
    return channels


def _by_channel(x: Tensor) -> Tensor:
    """x (N, C, ...) as (N, C, count / N): ggml's [rows, C, N], the layout of the batch norm ops."""
    return reshape(x, x.shape[0], x.shape[1], -1)


def _normalise(x3: Tensor, stats: CData, weight: Tensor | None, bias: Tensor | None, eps: float,
               shape: tuple[int, ...]) -> Tensor:
    """ggml_batch_norm (vendor patch 0025) of ``x3`` (``_by_channel``) with ``stats`` [C, 2] (means,
    variances), reshaped to ``shape``: one pass over x, one node whose backward pass is two passes (the
    per-channel sums, then the gradient of x)."""
    ptr = lib.ggml_batch_norm(graph_context(x3).ptr, x3.ptr, stats, weight.ptr if weight is not None else ffi.NULL,
                              bias.ptr if bias is not None else ffi.NULL, float(eps))
    return reshape(wrap(ptr, x3), *shape)


def batch_norm(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Batch normalisation with given statistics (inference, as PyTorch's ``F.batch_norm`` with
    ``training=False``): (x - running_mean) / sqrt(running_var + eps) * weight + bias, per channel
    (axis 1) of x (N, C), (N, C, L) or (N, C, H, W); the statistics, weight and bias are (C,).
    Differentiable in x, weight and bias (the statistics are constants)."""
    _check_batch_norm(x, {"running_mean": running_mean, "running_var": running_var, "weight": weight, "bias": bias})
    # the two (C,) statistics side by side: the [C, 2] layout ggml_batch_norm reads
    stats = lib.ggml_concat(graph_context(x).ptr, running_mean.ptr, running_var.ptr, 1)
    return _normalise(_by_channel(x), stats, weight, bias, eps, x.shape)


def batch_norm_train(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
                     bias: Tensor | None = None, momentum: float = 0.1, eps: float = 1e-5) -> tuple[Tensor, list[Tensor]]:
    """Batch normalisation in training (PyTorch's ``F.batch_norm`` with ``training=True``): x
    normalised per channel by the batch's mean and biased variance over every axis but the channels',
    then times ``weight`` plus ``bias``. Also returns the nodes that update the running statistics in
    place, running = (1 - momentum) * running + momentum * batch statistic (the variance unbiased):
    ggml_cpy nodes that no output depends on, for the training graph to compute besides its outputs."""
    channels = _check_batch_norm(x, {"running_mean": running_mean, "running_var": running_var,
                                     "weight": weight, "bias": bias})
    count = math.prod(x.shape) // channels
    if count < 2:
        raise ValueError(f"batch_norm: training needs more than one value per channel, got x of shape {x.shape} "
                         "(PyTorch refuses it too: the batch variance would be 0)")
    x3 = _by_channel(x)
    ctx = graph_context(x3).ptr
    # the batch's means and biased variances, [C, 2]; their gradient is part of ggml_batch_norm's
    stats = lib.ggml_batch_norm_stats(ctx, x3.ptr)
    updates: list[Tensor] = []
    for row, (running, weight_of_stat) in enumerate(((running_mean, momentum),
                                                     (running_var, momentum * count / (count - 1)))):
        stat = lib.ggml_view_1d(ctx, stats, channels, row * stats.nb[1])
        mixed = lib.ggml_add(ctx, lib.ggml_scale(ctx, running.ptr, 1.0 - momentum), lib.ggml_scale(ctx, stat, weight_of_stat))
        updates.append(wrap(lib.ggml_cpy(ctx, mixed, running.ptr), x3, ndim=1))
    # stats must be ggml_batch_norm_stats of the very node normalised: then the backward pass goes
    # through the batch statistics
    return _normalise(x3, stats, weight, bias, eps, x.shape), updates
