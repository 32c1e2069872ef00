"""Normalisation: over the last axis (layer norm, RMS norm), and per channel over the batch (batch norm)."""
from __future__ import annotations

import math
from collections.abc import Callable

from ..._lib import CData, lib
from ...core.tensor_data import ne_of
from .shape import reshape
from .tensor import Tensor, add, check_tensor, contiguous, exp, graph_context, log, mul, scale, sqr, sub, wrap


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


def _per_channel(t: Tensor, like: Tensor) -> Tensor:
    """A (C,) tensor (a parameter, a buffer or a batch statistic) seen as (1, C, 1, ...), which
    broadcasts over ``like`` (N, C, ...)."""
    ne = ne_of((1, like.shape[1], *(1,) * (like.ndim - 2)))
    return wrap(lib.ggml_reshape_4d(graph_context(t, like).ptr, t.ptr, *ne), t, like, ndim=like.ndim)


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


def _scale_shift(centered: Tensor, inv_std: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """centered * (inv_std * weight) + bias, per channel: the per-channel factors are multiplied first
    (C values), so the activations take one multiplication pass, and their gradient one fewer."""
    factor = mul(inv_std, _per_channel(weight, inv_std)) if weight is not None else inv_std
    y = mul(centered, factor)
    return add(y, _per_channel(bias, y)) if bias is not None else y


def batch_norm(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Batch normalisation with given statistics (inference, as PyTorch's ``F.batch_norm`` with
    ``training=False``): (x - running_mean) / sqrt(running_var + eps) * weight + bias, per channel
    (axis 1) of x (N, C), (N, C, L) or (N, C, H, W); the statistics, weight and bias are (C,)."""
    _check_batch_norm(x, {"running_mean": running_mean, "running_var": running_var, "weight": weight, "bias": bias})
    inv_std = exp(scale(log(scale(_per_channel(running_var, x), 1.0, eps)), -0.5))
    return _scale_shift(sub(x, _per_channel(running_mean, x)), inv_std, weight, bias)


def batch_norm_train(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
                     bias: Tensor | None = None, momentum: float = 0.1, eps: float = 1e-5) -> tuple[Tensor, list[Tensor]]:
    """Batch normalisation in training (PyTorch's ``F.batch_norm`` with ``training=True``): x
    normalised per channel by the batch's mean and biased variance over every axis but the channels',
    then times ``weight`` plus ``bias``. Also returns the nodes that update the running statistics in
    place, running = (1 - momentum) * running + momentum * batch statistic (the variance unbiased):
    ggml_cpy nodes that no output depends on, for the training graph to compute besides its outputs."""
    channels = _check_batch_norm(x, {"running_mean": running_mean, "running_var": running_var,
                                     "weight": weight, "bias": bias})
    n, count = x.shape[0], math.prod(x.shape) // channels
    if count < 2:
        raise ValueError(f"batch_norm: training needs more than one value per channel, got x of shape {x.shape} "
                         "(PyTorch refuses it too: the batch variance would be 0)")
    x3 = reshape(x, n, channels, count // n)
    ctx = graph_context(x3).ptr
    # REPEAT_BACK into a (1, C, 1) shape sums each channel (its rows in double precision, vendor patch 0004)
    like = _per_channel(running_mean, x3)

    def channel_mean(t: Tensor) -> Tensor:
        return scale(wrap(lib.ggml_repeat_back(ctx, t.ptr, like.ptr), t), 1.0 / count)

    batch_mean = channel_mean(x3)
    centered = sub(x3, batch_mean)
    var = channel_mean(sqr(centered))
    inv_std = exp(scale(log(scale(var, 1.0, eps)), -0.5))
    updates: list[Tensor] = []
    for running, stat, weight_of_stat in ((running_mean, batch_mean, momentum),
                                          (running_var, var, momentum * count / (count - 1))):
        flat = lib.ggml_reshape_1d(ctx, stat.ptr, channels)
        mixed = lib.ggml_add(ctx, lib.ggml_scale(ctx, running.ptr, 1.0 - momentum), lib.ggml_scale(ctx, flat, weight_of_stat))
        updates.append(wrap(lib.ggml_cpy(ctx, mixed, running.ptr), x3, ndim=1))
    return reshape(_scale_shift(centered, inv_std, weight, bias), *x.shape), updates
