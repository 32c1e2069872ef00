"""Activations and softmax. sigmoid, tanh and gelu are ggml's own ops (their backward passes: vendor
patches 0016 and 0022)."""
from __future__ import annotations

from ..._lib import lib
from .conv import pool_2d
from .reductions import sum_rows
from .shape import reshape
from .tensor import Tensor, check_tensor, contiguous, exp, graph_context, log, sub, wrap


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


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up as one node (ggml_swiglu_split, bit-identical to the two): its backward pass
    recomputes silu(gate) rather than keeping it, so a training graph holds one hidden-sized tensor per
    gated MLP fewer (Qwen2.5-0.5B, 1,024 tokens: 456 MiB over its 24 blocks)."""
    check_tensor("gate", gate)
    check_tensor("up", up)
    if gate.shape != up.shape:
        raise ValueError(f"swiglu: gate and up must have one shape, got {gate.shape} and {up.shape}")
    return wrap(lib.ggml_swiglu_split(graph_context(gate, up).ptr, contiguous(gate).ptr, contiguous(up).ptr), gate, up)


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


def cross_entropy_ids(logits: Tensor, ids: Tensor) -> Tensor:
    """Each row's softmax cross-entropy against a class id: float32 logits (..., k) and int32 ids of
    their leading shape (...) -> (...), log(sum(exp(logits[i]))) - logits[i, ids[i]]; 0 (and no gradient)
    where ids[i] is outside [0, k): an ignored target. A language model's (n, T, vocab) outputs go in
    as they are, with (n, T) ids.

    One CROSS_ENTROPY_IDS node (vendor patch 0045; other backends run it on the CPU), whose backward
    pass, (softmax(logits[i]) - onehot(ids[i])) * grad[i], reads the logits only: a training graph holds
    the logits and their gradient, where log-sum-exp, pick and their backward passes held four
    logits-sized tensors (at Qwen's 151,936 classes and 1,024 tokens, 593 MiB each). Sums in float64."""
    check_tensor("logits", logits)
    check_tensor("ids", ids)
    if not 2 <= logits.ndim <= 4 or logits.ptr.type != lib.GGML_TYPE_F32:
        raise ValueError(f"cross_entropy_ids: expected float32 (..., k) logits of 2 to 4 axes, got shape {logits.shape}")
    if ids.ptr.type != lib.GGML_TYPE_I32 or ids.shape != logits.shape[:-1]:
        raise TypeError(f"cross_entropy_ids: ids must be an int32 {logits.shape[:-1]} tensor, got shape {ids.shape}")
    ctx = graph_context(logits, ids).ptr
    return wrap(lib.ggml_cross_entropy_ids(ctx, contiguous(logits).ptr, contiguous(ids).ptr), logits, ndim=ids.ndim)


def log_softmax(a: Tensor) -> Tensor:
    """log(softmax) over the last axis of a (n, k), differentiable and finite for any logits.

    log(softmax(a)) would be log(0) = -inf once a probability underflows float32; here the row
    maximum is taken out first (``log_sum_exp``)."""
    check_tensor("a", a)
    if a.ndim != 2:
        raise ValueError(f"log_softmax: expected a (n, k) tensor, got shape {a.shape}")
    shifted, log_denominator = log_sum_exp(a)
    return sub(shifted, log_denominator)
