"""Matrix products: ggml's mul_mat and the linear map built on it."""
from __future__ import annotations

from ..._lib import lib
from ...core.tensor_data import ne_of
from .shape import reshape
from .tensor import Tensor, add, check_tensor, graph_context, wrap


def mul_mat(a: Tensor, b: Tensor) -> Tensor:
    """ggml_mul_mat: for a of shape (..., M, K) and b of shape (..., N, K), returns b @ a^T of
    shape (..., N, M). a's batch dims must divide b's."""
    check_tensor("a", a)
    check_tensor("b", b)
    na, nb = ne_of(a.shape), ne_of(b.shape)
    if na[0] != nb[0]:
        raise ValueError(f"mul_mat: the last axes must match, got {a.shape} and {b.shape}")
    if nb[2] % na[2] or nb[3] % na[3]:
        raise ValueError(f"mul_mat: batch dims of {a.shape} must divide those of {b.shape}")
    if lib.ggml_is_transposed(a.ptr):
        raise ValueError("mul_mat: a must not be transposed (make it contiguous with cont())")
    return wrap(lib.ggml_mul_mat(graph_context(a, b).ptr, a.ptr, b.ptr), a, b)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight^T + bias, for x of shape (..., in) (each row of the last axis), weight (out, in),
    bias (out,).

    A sequence (n, T, in) is multiplied as one matrix (n*T, in): as (n, T, in), ggml's MUL_MAT would
    broadcast the weight over n and its backward pass would compute one weight gradient per sample,
    then sum them (REPEAT_BACK), in n smaller, slower products and n times the memory."""
    if x.ndim > 2 and weight.ndim == 2:
        rows = reshape(x, -1, x.shape[-1])
        return reshape(linear(rows, weight, bias), *x.shape[:-1], weight.shape[0])
    y = mul_mat(weight, x)
    return add(y, bias) if bias is not None else y
