"""Ops that move elements around: reshape, permute, concatenation, column slices, and rows picked by id."""
from __future__ import annotations

from ..._lib import c_str, lib
from ...core.tensor_data import ne_of
from .tensor import Tensor, check_tensor, cont, contiguous, graph_context, wrap


def reshape(a: Tensor, *shape: int) -> Tensor:
    """The same elements with numpy-order ``shape`` (at most 4 dims; one entry may be -1)."""
    check_tensor("a", a)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    n = lib.ggml_nelements(a.ptr)
    dims = [int(s) for s in shape]
    if dims.count(-1) > 1 or any(s < -1 or s == 0 for s in dims):
        raise ValueError(f"reshape: invalid shape {tuple(dims)}")
    if -1 in dims:
        known = 1
        for s in dims:
            known *= s if s != -1 else 1
        if n % known:
            raise ValueError(f"reshape: cannot reshape {a.shape} into {tuple(dims)}")
        dims[dims.index(-1)] = n // known
    total = 1
    for s in dims:
        total *= s
    if total != n:
        raise ValueError(f"reshape: cannot reshape {a.shape} ({n} elements) into {tuple(dims)}")
    a = contiguous(a)
    ne = ne_of(tuple(dims))
    ctx = graph_context(a).ptr
    return wrap(lib.ggml_reshape_4d(ctx, a.ptr, ne[0], ne[1], ne[2], ne[3]), a, ndim=len(dims))


def permute(a: Tensor, *axes: int) -> Tensor:
    """numpy.transpose semantics: result.shape[i] = a.shape[axes[i]], as a contiguous copy.

    ggml_permute alone gives a strided view, and most ggml ops assert contiguous rows (some when the
    graph is built, others only when it is computed or differentiated), so the view is copied here
    (ggml_cont, differentiable) and no op of this module ever receives a non-contiguous tensor."""
    check_tensor("a", a)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    nd = a.ndim
    if sorted(axes) != list(range(nd)):
        raise ValueError(f"permute: axes {axes} are not a permutation of range({nd})")
    k = lib.GGML_MAX_DIMS - nd
    full = list(range(k)) + [k + ax for ax in axes]
    pos = [0] * lib.GGML_MAX_DIMS
    last = lib.GGML_MAX_DIMS - 1
    for i, src in enumerate(full):
        pos[last - src] = last - i
    # The backward pass of PERMUTE hands `a` a strided view as gradient, and ggml_add (used to sum
    # the gradients of a tensor with several users) asserts contiguous rows on it; RESHAPE's backward
    # makes its gradient contiguous, so `a` goes through a same-shape reshape first.
    src = contiguous(a)
    same = wrap(lib.ggml_reshape(graph_context(src).ptr, src.ptr, src.ptr), src)
    return cont(wrap(lib.ggml_permute(graph_context(a).ptr, same.ptr, *pos), a))


def concat(a: Tensor, b: Tensor, axis: int) -> Tensor:
    """numpy.concatenate((a, b), axis): the shapes agree except along ``axis`` (numpy order, negative
    counts from the end), and so do the dtypes. Differentiable (ggml's CONCAT backward, vendor patch
    0013): each input's gradient is its part of the output's."""
    check_tensor("a", a)
    check_tensor("b", b)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"concat: axis must be an int, got {type(axis).__name__}")
    if a.ndim != b.ndim:
        raise ValueError(f"concat: a and b must have the same number of axes, got shapes {a.shape} and {b.shape}")
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"concat: axis {axis} is out of range for {a.ndim}-D tensors")
    axis %= a.ndim
    if any(x != y for i, (x, y) in enumerate(zip(a.shape, b.shape)) if i != axis):
        raise ValueError(f"concat: shapes {a.shape} and {b.shape} differ outside axis {axis}")
    if a.ptr.type != b.ptr.type:
        raise TypeError(f"concat: a and b must have the same dtype, got {c_str(lib.ggml_type_name(a.ptr.type))} "
                        f"and {c_str(lib.ggml_type_name(b.ptr.type))}")
    ctx = graph_context(a, b).ptr
    return wrap(lib.ggml_concat(ctx, a.ptr, b.ptr, a.ndim - 1 - axis), a, b)


def columns(a: Tensor, start: int, stop: int) -> Tensor:
    """a[:, start:stop] of a (n, k) tensor, as a contiguous copy."""
    check_tensor("a", a)
    if a.ndim != 2 or not 0 <= start < stop <= a.shape[1]:
        raise ValueError(f"columns: cannot take columns [{start}, {stop}) of a tensor of shape {a.shape}")
    p = a.ptr
    view = lib.ggml_view_2d(graph_context(a).ptr, p, stop - start, a.shape[0], p.nb[1], start * p.nb[0])
    return cont(wrap(view, a))


def rows(a: Tensor, start: int, stop: int, graph: Tensor | None = None) -> Tensor:
    """a[start:stop] of a 2-D tensor, a view (whole rows are contiguous). ``graph``: any tensor of the
    graph being built, when ``a`` is a parameter (parameters belong to no graph)."""
    check_tensor("a", a)
    if a.ndim != 2 or not 0 <= start < stop <= a.shape[0]:
        raise ValueError(f"rows: cannot take rows [{start}, {stop}) of a tensor of shape {a.shape}")
    p = a.ptr
    ctx = graph_context(*(t for t in (a, graph) if t is not None))
    view = lib.ggml_view_2d(ctx.ptr, p, p.ne[0], stop - start, p.nb[1], start * p.nb[1])
    return Tensor(view, ctx, ctx, 2)


def select(a: Tensor, i: int) -> Tensor:
    """a[:, i] of a 3-D tensor (n, k, m): (n, m), a contiguous copy (of any type: int32 ids too)."""
    check_tensor("a", a)
    if a.ndim != 3 or not 0 <= i < a.shape[1]:
        raise ValueError(f"select: cannot take a[:, {i}] of a tensor of shape {a.shape}")
    p = a.ptr
    view = lib.ggml_view_2d(graph_context(a).ptr, p, p.ne[0], a.shape[0], p.nb[2], i * p.nb[1])
    return cont(wrap(view, a, ndim=2))


def last_steps(a: Tensor, k: int) -> Tensor:
    """a[:, -k:] of a (n, T, d) tensor: the last ``k`` steps of each sequence, as a contiguous copy (``a``
    itself when it has ``k`` steps)."""
    check_tensor("a", a)
    if a.ndim != 3 or not 0 < k <= a.shape[1]:
        raise ValueError(f"last_steps: cannot take the last {k} steps of a tensor of shape {a.shape}")
    if k == a.shape[1]:
        return a
    p = a.ptr
    view = lib.ggml_view_3d(graph_context(a).ptr, p, p.ne[0], k, p.ne[2], p.nb[1], p.nb[2], (a.shape[1] - k) * p.nb[1])
    return cont(wrap(view, a))


def flatten(a: Tensor) -> Tensor:
    """(n, d1, d2, ...) -> (n, d1*d2*...), in numpy (C) order."""
    n = a.shape[0]
    return reshape(a, n, -1)


def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """Rows of ``table`` (vocab, dim) picked by the int32 ``ids`` (n, T): (n, T, dim).

    GET_ROWS over the ids flattened to one axis: ggml's backward pass of GET_ROWS takes a 2-D table
    and 1-D indices only. The ids get no gradient; the table gets the rows' gradients summed.

    Ids must lie in [0, vocab). Those the user passes in are checked in Python (an ``Embedding`` layer's
    input); the others (computed in the graph, such as ``to_int32`` of input values, or tokens that
    ``generate`` sampled) are checked by the CPU backend as the graph runs: an id outside the table
    fails the computation, which raises ValueError, and nothing after this op is computed (so no
    training step is taken; vendor patch 0037). The CUDA and Metal kernels do not check them."""
    check_tensor("ids", ids)
    check_tensor("table", table)
    if ids.ptr.type != lib.GGML_TYPE_I32 or ids.ndim != 2:
        raise TypeError(f"embedding: ids must be an int32 (n, T) tensor, got a {ids.ndim}-D "
                        f"{c_str(lib.ggml_type_name(ids.ptr.type))} tensor")
    if table.ndim != 2:
        raise ValueError(f"embedding: the table must be (vocab, dim), got shape {table.shape}")
    n, steps = ids.shape
    ctx = graph_context(ids, table).ptr
    src = contiguous(ids)
    flat = wrap(lib.ggml_reshape_1d(ctx, src.ptr, n * steps), src, ndim=1)
    rows = wrap(lib.ggml_get_rows(ctx, table.ptr, flat.ptr), flat, table, ndim=2)
    return wrap(lib.ggml_reshape_3d(ctx, rows.ptr, table.shape[1], steps, n), rows, ndim=3)


def pick(a: Tensor, ids: Tensor) -> Tensor:
    """``a[i, ids[i]]`` of a (n, k) tensor and int32 ``ids`` (n,): (n, 1), differentiable in ``a``.

    One batched GET_ROWS over ``a`` seen as n matrices of k one-value rows (the index of a value never
    exceeds k, so no flat index i * k + id is formed); its backward pass scatters each gradient into
    its row's picked value (vendor patch 0042; CUDA runs that node on the CPU). Ids outside [0, k)
    fail the computation on the CPU as ``embedding``'s do."""
    check_tensor("a", a)
    check_tensor("ids", ids)
    if a.ndim != 2:
        raise ValueError(f"pick: expected a (n, k) tensor, got shape {a.shape}")
    if ids.ptr.type != lib.GGML_TYPE_I32 or ids.shape != (a.shape[0],):
        raise TypeError(f"pick: ids must be an int32 ({a.shape[0]},) tensor, got a "
                        f"{c_str(lib.ggml_type_name(ids.ptr.type))} tensor of shape {ids.shape}")
    n, k = a.shape
    ctx = graph_context(a, ids).ptr
    table = wrap(lib.ggml_reshape_3d(ctx, contiguous(a).ptr, 1, k, n), a, ndim=3)
    index = wrap(lib.ggml_reshape_2d(ctx, contiguous(ids).ptr, 1, n), ids, ndim=2)
    picked = wrap(lib.ggml_get_rows(ctx, table.ptr, index.ptr), table, index, ndim=3)
    return wrap(lib.ggml_reshape_2d(ctx, picked.ptr, 1, n), picked, ndim=2)


def to_int32(a: Tensor) -> Tensor:
    """Float values as int32 (ggml_cast, truncating toward zero): ids that travelled as floats. No gradient
    flows through it. Values beyond int32's range have no defined result (x86 gives -2^31): as ids, an
    index op refuses them (``embedding``)."""
    check_tensor("a", a)
    return wrap(lib.ggml_cast(graph_context(a).ptr, a.ptr, lib.GGML_TYPE_I32), a)
