"""Activations and softmax. sigmoid, tanh and gelu are ggml's own ops (their backward passes: vendor
patches 0016 and 0022)."""
from __future__ import annotations

from ..._lib import lib
from .conv import pool_2d
from .reductions import sum_rows
from .shape import reshape
from .tensor import Tensor, check_tensor, exp, graph_context, log, sub, wrap


def sigmoid(a: Tensor) -> Tensor:
    """1 / (1 + exp(-a)) (ggml_sigmoid): exactly 0 and 1 in the tails (expf overflows to inf for
    a < -88.7: 0 instead of a denormal), gradient y (1 - y) from its own output."""
    check_tensor("a", a)
    return wrap(lib.ggml_sigmoid(graph_context(a).ptr, a.ptr), a)


def tanh(a: Tensor) -> Tensor:
    """tanh(a) (ggml_tanh: libm's tanhf), gradient 1 - y^2 from its own output."""
    check_tensor("a", a)
    return wrap(lib.ggml_tanh(graph_context(a).ptr, a.ptr), a)


def gelu(a: Tensor) -> Tensor:
    """GELU, tanh approximation (as PyTorch's approximate="tanh"):
    0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)).

    ggml_gelu: one node forward and one (GELU_BACK) backward, both computed in float32 on the CPU
    (vendor patch 0022; ggml's CPU GELU used to round its input to float16 for a table)."""
    check_tensor("a", a)
    return wrap(lib.ggml_gelu(graph_context(a).ptr, a.ptr), a)


def softmax(a: Tensor) -> Tensor:
    """Softmax over the last (numpy) axis."""
    check_tensor("a", a)
    return wrap(lib.ggml_soft_max(graph_context(a).ptr, a.ptr), a)


def log_sum_exp(a: Tensor) -> tuple[Tensor, Tensor]:
    """``(a - m, log(sum(exp(a - m))))`` of a (n, k), m each row's maximum: the shifted logits (n, k)
    and the log of their softmax denominator (n, 1), differentiable and finite for any logits.

    The logits' log-sum-exp is m plus the second; a log-softmax is the first minus the second (a
    cross-entropy picks from the first). m comes from max pooling over the row (ggml has no
    differentiable row max); its gradient cancels exactly in both."""
    check_tensor("a", a)
    if a.ndim != 2:
        raise ValueError(f"log_sum_exp: expected a (n, k) tensor, got shape {a.shape}")
    n, k = a.shape
    m = reshape(pool_2d(reshape(a, n, 1, 1, k), "max", (1, k)), n, 1)
    shifted = sub(a, m)
    return shifted, log(sum_rows(exp(shifted)))


def log_softmax(a: Tensor) -> Tensor:
    """log(softmax) over the last axis of a (n, k), differentiable and finite for any logits.

    log(softmax(a)) would be log(0) = -inf once a probability underflows float32; here the row
    maximum is taken out first (``log_sum_exp``)."""
    check_tensor("a", a)
    if a.ndim != 2:
        raise ValueError(f"log_softmax: expected a (n, k) tensor, got shape {a.shape}")
    shifted, log_denominator = log_sum_exp(a)
    return sub(shifted, log_denominator)
