"""Activations and softmax. sigmoid and tanh are ggml's own ops (their backward passes: vendor patch
0016); gelu is composed from ops ggml can differentiate (ggml has no GELU backward)."""
from __future__ import annotations

from ..._lib import lib
from .conv import pool_2d
from .reductions import sum_rows
from .shape import reshape
from .tensor import Tensor, check_tensor, exp, graph_context, log, mul, scale, sqr, sub, wrap


def sigmoid(a: Tensor) -> Tensor:
    """1 / (1 + exp(-a)) (ggml_sigmoid): exactly 0 and 1 in the tails (expf overflows to inf for
    a < -88.7: 0 instead of a denormal), gradient y (1 - y) from its own output."""
    check_tensor("a", a)
    return wrap(lib.ggml_sigmoid(graph_context(a).ptr, a.ptr), a)


def tanh(a: Tensor) -> Tensor:
    """tanh(a) (ggml_tanh: libm's tanhf), gradient 1 - y^2 from its own output."""
    check_tensor("a", a)
    return wrap(lib.ggml_tanh(graph_context(a).ptr, a.ptr), a)


_GELU_K = 2.0 * 0.7978845608028654  # 2 * sqrt(2 / pi)


def gelu(a: Tensor) -> Tensor:
    """GELU, tanh approximation (as PyTorch's approximate="tanh" and ggml_gelu):
    0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)).

    ggml has no GELU backward (and its CPU GELU reads a float16 table): composed, with the sigmoid's
    argument as a (k + k 0.044715 a^2), k = 2 sqrt(2/pi): 3 nodes (sqr, scale with bias, mul) where
    k (a + 0.044715 a^3) takes 5, so 5 forward and 12 backward nodes in all."""
    inner = mul(a, scale(sqr(a), _GELU_K * 0.044715, _GELU_K))
    return mul(a, sigmoid(inner))


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
