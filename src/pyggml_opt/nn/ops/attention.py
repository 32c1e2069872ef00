"""Attention over sequences: causal masking and scaled dot-product attention."""
from __future__ import annotations

from ..._lib import lib
from .activations import softmax
from .linalg import mul_mat
from .shape import permute
from .tensor import Tensor, check_tensor, graph_context, scale, wrap


def causal_mask(a: Tensor) -> Tensor:
    """Attention scores (..., T_q, T_k) with every key after its query set to -inf (ggml_diag_mask_inf),
    so that a softmax over the keys gives them weight 0."""
    check_tensor("a", a)
    return wrap(lib.ggml_diag_mask_inf(graph_context(a).ptr, a.ptr, 0), a)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True) -> Tensor:
    """Scaled dot-product attention: q, k, v (n, heads, T, d_head) -> (n, heads, T, d_head),
    softmax(q k^T / sqrt(d_head)) v, with future keys masked when ``causal``."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t)
        if t.ndim != 4:
            raise ValueError(f"attention: {name} must be (n, heads, T, d_head), got shape {t.shape}")
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"attention: q, k, v must have one shape, got {q.shape}, {k.shape}, {v.shape}")
    scores = scale(mul_mat(k, q), 1.0 / q.shape[3] ** 0.5)       # (n, heads, T_q, T_k)
    weights = softmax(causal_mask(scores) if causal else scores)
    return mul_mat(permute(v, 0, 1, 3, 2), weights)                 # (n, heads, T_q, d_head)
