"""Activations and softmax. ggml has no backward pass for sigmoid, tanh or gelu: they are composed
here from ops it can differentiate."""
from __future__ import annotations

from ..._lib import lib
from .conv import pool_2d
from .reductions import sum_rows
from .shape import reshape
from .tensor import (Tensor, add, check_tensor, exp, graph_context, log, mul, neg, scale, softplus, sqr, sub,
                     wrap)


def sigmoid(a: Tensor) -> Tensor:
    """1 / (1 + exp(-a)), as exp(-softplus(-a)): every op used has a ggml backward pass."""
    return exp(neg(softplus(neg(a))))


def tanh(a: Tensor) -> Tensor:
    """tanh(a) = 2 sigmoid(2a) - 1."""
    return scale(sigmoid(scale(a, 2.0)), 2.0, -1.0)


_GELU_K = 2.0 * 0.7978845608028654  # 2 * sqrt(2 / pi)


def gelu(a: Tensor) -> Tensor:
    """GELU, tanh approximation (as PyTorch's approximate="tanh" and ggml_gelu):
    0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3))."""
    inner = add(a, scale(mul(sqr(a), a), 0.044715))
    return mul(a, sigmoid(scale(inner, _GELU_K)))


def softmax(a: Tensor) -> Tensor:
    """Softmax over the last (numpy) axis."""
    check_tensor("a", a)
    return wrap(lib.ggml_soft_max(graph_context(a).ptr, a.ptr), a)


def log_softmax(a: Tensor) -> Tensor:
    """log(softmax) over the last axis of a (n, k), differentiable and finite for any logits.

    log(softmax(a)) would be log(0) = -inf once a probability underflows float32; here the row
    maximum m is taken out first: (a - m) - log(sum(exp(a - m))). m comes from max pooling over the
    row (ggml has no differentiable row max); its gradient cancels exactly in the formula."""
    check_tensor("a", a)
    if a.ndim != 2:
        raise ValueError(f"log_softmax: expected a (n, k) tensor, got shape {a.shape}")
    n, k = a.shape
    m = reshape(pool_2d(reshape(a, n, 1, 1, k), "max", (1, k)), n, 1)
    shifted = sub(a, m)
    return sub(shifted, log(sum_rows(exp(shifted))))
