"""Sums and means over the last axis or over everything."""
from __future__ import annotations

from ..._lib import lib
from .tensor import Tensor, check_tensor, contiguous, graph_context, scale, wrap


def mean(a: Tensor) -> Tensor:
    """Mean over the last (numpy) axis, kept as size 1.

    Built as sum_rows * (1/n), not ggml_mean: ggml's MEAN backward accumulates with ggml_add1, which
    asserts a scalar, so it aborts whenever the input also gets a gradient from another path (as in
    layer_norm: x - mean(x)). SUM_ROWS' backward handles that case."""
    check_tensor("a", a)
    return scale(sum_rows(a), 1.0 / int(a.ptr.ne[0]))


def sum_rows(a: Tensor) -> Tensor:
    """Sum over the last (numpy) axis, kept as size 1."""
    check_tensor("a", a)
    # ggml's CPU SUM / SUM_ROWS read rows as if contiguous: a strided view would give a wrong sum
    a = contiguous(a)
    return wrap(lib.ggml_sum_rows(graph_context(a).ptr, a.ptr), a)


def sum(a: Tensor) -> Tensor:  # noqa: A001 - ggml's name
    """Sum of all elements (a scalar)."""
    check_tensor("a", a)
    a = contiguous(a)  # as in sum_rows
    return wrap(lib.ggml_sum(graph_context(a).ptr, a.ptr), a, ndim=1)


