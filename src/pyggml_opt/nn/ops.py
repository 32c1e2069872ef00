"""Symbolic tensors and the ops that build ggml graphs from them.

A ``Tensor`` wraps a ``struct ggml_tensor *``. Shapes are in numpy order (batch first), the reverse
of ggml's ``ne``. Ops that create tensors put them in the compute context of the first argument
that has one (parameters have none; the model input has the graph's), so a model is an ordinary
Python function of its input and parameters. Every op checks its arguments' shapes and raises
``ValueError`` before ggml could assert.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .._lib import CData, c_str, ffi, lib
from ..checks import check_pair
from ..core import ClosedError, Context, Handle
from ..core.tensor_data import ne_of, shape_of
from .shapes import conv2d_output_hw, pool2d_output_hw


class Tensor:
    """A node of a ggml graph being built (or a parameter). Using it after the context that holds it
    was closed raises ``ClosedError`` instead of reading freed memory."""

    __slots__ = ("_ptr", "ctx", "ndim", "_owner")

    def __init__(self, ptr: CData, ctx: Context | None = None, owner: Handle | None = None,
                 ndim: int | None = None) -> None:
        self._ptr = ptr         # struct ggml_tensor *
        self.ctx = ctx          # core.Context the graph is built in (None for parameters)
        # numpy rank: ggml does not store it (a batch of one looks like a vector)
        self.ndim = ndim if ndim is not None else max(1, lib.ggml_n_dims(ptr))
        self._owner = owner     # the context (a core Handle) holding `ptr`; kept alive by this tensor

    @property
    def ptr(self) -> CData:
        """The ``struct ggml_tensor *``."""
        if self._owner is not None and self._owner.closed:
            raise ClosedError("this tensor's graph context is closed")
        return self._ptr

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy-order shape; the batch dimension, if any, comes first."""
        return shape_of(self.ptr, self.ndim)

    @property
    def name(self) -> str:
        return c_str(lib.ggml_get_name(self.ptr))

    @property
    def op(self) -> str:
        return c_str(lib.ggml_op_desc(self.ptr))

    def __repr__(self) -> str:
        if self._owner is not None and self._owner.closed:
            return "Tensor(<graph context closed>)"
        return f"Tensor(shape={self.shape}, op={self.op}, name={self.name!r})"

    # arithmetic sugar
    def __add__(self, other: Tensor) -> Tensor: return add(self, other)
    def __sub__(self, other: Tensor) -> Tensor: return sub(self, other)
    def __mul__(self, other: Tensor) -> Tensor: return mul(self, other)
    def __truediv__(self, other: Tensor) -> Tensor: return div(self, other)
    def __neg__(self) -> Tensor: return neg(self)


def graph_context(*tensors: Tensor) -> Context:
    """The compute context of the first tensor that has one."""
    for t in tensors:
        if t.ctx is not None:
            return t.ctx
    raise ValueError("at least one argument must come from the graph being built (the model input or "
                     "a value computed from it); parameters alone cannot start a graph")


def wrap(ptr: CData, *args: Tensor, ndim: int | None = None) -> Tensor:
    """A new graph node ``ptr`` computed from ``args``, in their compute context."""
    ctx = graph_context(*args)
    return Tensor(ptr, ctx, ctx, ndim if ndim is not None else max(t.ndim for t in args))


def check_tensor(name: str, t: object) -> None:
    """TypeError unless ``t`` is a Tensor."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")


def _check_repeat(a: Tensor, b: Tensor, op: str) -> None:
    check_tensor("a", a)
    check_tensor("b", b)
    na, nb = ne_of(a.shape), ne_of(b.shape)
    if any(x % y for x, y in zip(na, nb)) or any(y == 0 for y in nb):
        raise ValueError(f"{op}: shape {b.shape} cannot be broadcast to {a.shape} "
                         "(each dimension of b must divide the matching one of a; b is repeated over a)")


# ---- element-wise ---------------------------------------------------------------------------------
def add(a: Tensor, b: Tensor) -> Tensor:
    """a + b, b broadcast (repeated) over a."""
    _check_repeat(a, b, "add")
    return wrap(lib.ggml_add(graph_context(a, b).ptr, a.ptr, b.ptr), a, b)


def sub(a: Tensor, b: Tensor) -> Tensor:
    """a - b; ggml's backward pass needs b of a's shape, so a broadcast b is negated and added."""
    _check_repeat(a, b, "sub")
    if a.shape != b.shape:
        return add(a, scale(b, -1.0))
    return wrap(lib.ggml_sub(graph_context(a, b).ptr, a.ptr, b.ptr), a, b)


def mul(a: Tensor, b: Tensor) -> Tensor:
    """a * b element-wise, b broadcast over a."""
    _check_repeat(a, b, "mul")
    return wrap(lib.ggml_mul(graph_context(a, b).ptr, a.ptr, b.ptr), a, b)


def div(a: Tensor, b: Tensor) -> Tensor:
    """a / b element-wise; a broadcast b goes through exp(-log b) (ggml's DIV backward needs equal shapes)."""
    _check_repeat(a, b, "div")
    if a.shape != b.shape:
        return mul(a, exp(neg(log(b))))
    return wrap(lib.ggml_div(graph_context(a, b).ptr, a.ptr, b.ptr), a, b)


def scale(a: Tensor, s: float, bias: float = 0.0) -> Tensor:
    """a * s + bias."""
    check_tensor("a", a)
    if bias:
        return wrap(lib.ggml_scale_bias(graph_context(a).ptr, a.ptr, float(s), float(bias)), a)
    return wrap(lib.ggml_scale(graph_context(a).ptr, a.ptr, float(s)), a)


def _unary(fn_name: str) -> Callable[[Tensor], Tensor]:
    fn = getattr(lib, fn_name)

    def op(a: Tensor) -> Tensor:
        check_tensor("a", a)
        return wrap(fn(graph_context(a).ptr, a.ptr), a)

    op.__name__ = fn_name[len("ggml_"):]
    op.__doc__ = f"Element-wise {op.__name__} (``{fn_name}``)."
    return op


relu = _unary("ggml_relu")
exp = _unary("ggml_exp")
log = _unary("ggml_log")
sqr = _unary("ggml_sqr")
sqrt = _unary("ggml_sqrt")
neg = _unary("ggml_neg")
abs = _unary("ggml_abs")  # noqa: A001 - ggml's name
softplus = _unary("ggml_softplus")
silu = _unary("ggml_silu")


# ---- composed activations: ggml has no backward pass for sigmoid, tanh, gelu or norm -------------
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


def layer_norm(a: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalise over the last (numpy) axis to zero mean and unit variance (no affine part)."""
    centered = sub(a, mean(a))
    var = mean(sqr(centered))
    inv_std = exp(scale(log(scale(var, 1.0, eps)), -0.5))  # (var + eps)^-1/2 with differentiable ops
    return mul(centered, inv_std)


def rms_norm(a: Tensor, eps: float = 1e-6) -> Tensor:
    """a / sqrt(mean(a^2) + eps) over the last (numpy) axis (ggml_rms_norm, which ggml differentiates)."""
    check_tensor("a", a)
    src = a if lib.ggml_is_contiguous(a.ptr) else cont(a)
    return wrap(lib.ggml_rms_norm(graph_context(src).ptr, src.ptr, float(eps)), src)


def softmax(a: Tensor) -> Tensor:
    """Softmax over the last (numpy) axis."""
    check_tensor("a", a)
    return wrap(lib.ggml_soft_max(graph_context(a).ptr, a.ptr), a)


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


# ---- reductions -----------------------------------------------------------------------------------
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
    a = _contiguous(a)
    return wrap(lib.ggml_sum_rows(graph_context(a).ptr, a.ptr), a)


def sum(a: Tensor) -> Tensor:  # noqa: A001 - ggml's name
    """Sum of all elements (a scalar)."""
    check_tensor("a", a)
    a = _contiguous(a)
    return wrap(lib.ggml_sum(graph_context(a).ptr, a.ptr), a, ndim=1)


def _contiguous(a: Tensor) -> Tensor:
    # ggml's CPU SUM / SUM_ROWS read rows as if contiguous: a strided view would give a wrong sum
    return a if lib.ggml_is_contiguous(a.ptr) else cont(a)


# ---- linear algebra -------------------------------------------------------------------------------
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
    """x @ weight^T + bias, for x of shape (n, in), weight (out, in), bias (out,)."""
    y = mul_mat(weight, x)
    return add(y, bias) if bias is not None else y


# ---- shape ----------------------------------------------------------------------------------------
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
    if not lib.ggml_is_contiguous(a.ptr):
        a = cont(a)
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
    src = a if lib.ggml_is_contiguous(a.ptr) else cont(a)
    same = wrap(lib.ggml_reshape(graph_context(src).ptr, src.ptr, src.ptr), src)
    return cont(wrap(lib.ggml_permute(graph_context(a).ptr, same.ptr, *pos), a))


def cont(a: Tensor) -> Tensor:
    """A contiguous copy."""
    check_tensor("a", a)
    return wrap(lib.ggml_cont(graph_context(a).ptr, a.ptr), a)


def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """Rows of ``table`` (vocab, dim) picked by the int32 ``ids`` (n, T): (n, T, dim).

    GET_ROWS over the ids flattened to one axis: ggml's backward pass of GET_ROWS takes a 2-D table
    and 1-D indices only. The ids get no gradient; the table gets the rows' gradients summed."""
    check_tensor("ids", ids)
    check_tensor("table", table)
    if ids.ptr.type != lib.GGML_TYPE_I32 or ids.ndim != 2:
        raise TypeError(f"embedding: ids must be an int32 (n, T) tensor, got a {ids.ndim}-D "
                        f"{c_str(lib.ggml_type_name(ids.ptr.type))} tensor")
    if table.ndim != 2:
        raise ValueError(f"embedding: the table must be (vocab, dim), got shape {table.shape}")
    n, steps = ids.shape
    ctx = graph_context(ids, table).ptr
    src = ids if lib.ggml_is_contiguous(ids.ptr) else cont(ids)
    flat = wrap(lib.ggml_reshape_1d(ctx, src.ptr, n * steps), src, ndim=1)
    rows = wrap(lib.ggml_get_rows(ctx, table.ptr, flat.ptr), flat, table, ndim=2)
    return wrap(lib.ggml_reshape_3d(ctx, rows.ptr, table.shape[1], steps, n), rows, ndim=3)


def to_int32(a: Tensor) -> Tensor:
    """Float values as int32 (ggml_cast): ids that travelled as floats. No gradient flows through it."""
    check_tensor("a", a)
    return wrap(lib.ggml_cast(graph_context(a).ptr, a.ptr, lib.GGML_TYPE_I32), a)


def columns(a: Tensor, start: int, stop: int) -> Tensor:
    """a[:, start:stop] of a (n, k) tensor, as a contiguous copy."""
    check_tensor("a", a)
    if a.ndim != 2 or not 0 <= start < stop <= a.shape[1]:
        raise ValueError(f"columns: cannot take columns [{start}, {stop}) of a tensor of shape {a.shape}")
    p = a.ptr
    view = lib.ggml_view_2d(graph_context(a).ptr, p, stop - start, a.shape[0], p.nb[1], start * p.nb[0])
    return cont(wrap(view, a))


def flatten(a: Tensor) -> Tensor:
    """(n, d1, d2, ...) -> (n, d1*d2*...), in numpy (C) order."""
    n = a.shape[0]
    return reshape(a, n, -1)


# ---- convolution and pooling ----------------------------------------------------------------------
def conv_2d(x: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
            dilation: int | Sequence[int] = 1) -> Tensor:
    """2-D convolution (im2col + mul_mat, differentiable): x (n, c_in, h, w), kernel
    (c_out, c_in, kh, kw) -> (n, c_out, h_out, w_out)."""
    check_tensor("x", x)
    check_tensor("kernel", kernel)
    sh, sw = check_pair("stride", stride)
    ph, pw = check_pair("padding", padding, 0)
    dh, dw = check_pair("dilation", dilation)
    xs, ks = ne_of(x.shape), ne_of(kernel.shape)  # ne order: [w, h, c, n]
    if xs[2] != ks[2]:
        raise ValueError(f"conv_2d: input has {xs[2]} channels, kernel expects {ks[2]} "
                         f"(input {x.shape}, kernel {kernel.shape})")
    oh, ow = conv2d_output_hw((xs[1], xs[0]), (ks[1], ks[0]), (sh, sw), (ph, pw), (dh, dw))
    if oh < 1 or ow < 1:
        raise ValueError(f"conv_2d: kernel {kernel.shape[-2:]} does not fit input {x.shape[-2:]} with padding {(ph, pw)}")
    return wrap(lib.ggml_conv_2d(graph_context(x, kernel).ptr, kernel.ptr, x.ptr, sw, sh, pw, ph, dw, dh), x, kernel, ndim=4)


def conv_1d(x: Tensor, kernel: Tensor, stride: int = 1, padding: int = 0, dilation: int = 1) -> Tensor:
    """1-D convolution, x (n, c_in, length), kernel (c_out, c_in, k) -> (n, c_out, length'): the 2-D
    convolution of rows of height one (ggml's own conv_1d packs its im2col in float16)."""
    check_tensor("x", x)
    check_tensor("kernel", kernel)
    if x.ndim != 3 or kernel.ndim != 3:
        raise ValueError(f"conv_1d: expected x (n, c_in, length) and kernel (c_out, c_in, k), got {x.shape} "
                         f"and {kernel.shape}")
    n, c_in, length = x.shape
    c_out, _, k = kernel.shape
    rows = reshape(x, n, c_in, 1, length)
    src = kernel if lib.ggml_is_contiguous(kernel.ptr) else cont(kernel)
    kernel_rows = wrap(lib.ggml_reshape_4d(graph_context(x, src).ptr, src.ptr, k, 1, src.shape[1], c_out), x, src,
                       ndim=4)
    y = conv_2d(rows, kernel_rows, (1, stride), (0, padding), (1, dilation))
    return reshape(y, n, c_out, y.shape[3])


def pool_2d(x: Tensor, kind: str, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,
            padding: int | Sequence[int] = 0) -> Tensor:
    """Max or average pooling over the last two axes of x (n, c, h, w); kind: "max" or "avg"."""
    check_tensor("x", x)
    ops = {"max": lib.GGML_OP_POOL_MAX, "avg": lib.GGML_OP_POOL_AVG}
    if kind not in ops:
        raise ValueError(f"pool_2d: kind must be 'max' or 'avg', got {kind!r}")
    kh, kw = check_pair("kernel_size", kernel_size)
    sh, sw = check_pair("stride", stride if stride is not None else (kh, kw))
    ph, pw = check_pair("padding", padding, 0)
    xs = ne_of(x.shape)
    if pool2d_output_hw((xs[1], xs[0]), (kh, kw), (sh, sw), (ph, pw)) is None:
        raise ValueError(f"pool_2d: window {(kh, kw)} does not fit input {x.shape[-2:]}")
    return wrap(lib.ggml_pool_2d(graph_context(x).ptr, x.ptr, ops[kind], kw, kh, sw, sh, float(pw), float(ph)), x, ndim=4)


# The element types a graph input may have: float32 values, or int32 ids (token ids for an Embedding).
INPUT_TYPES = {"float32": lib.GGML_TYPE_F32, "int32": lib.GGML_TYPE_I32}


def new_input(ctx: Context, shape: tuple[int, ...], name: str = "input", dtype: str = "float32") -> Tensor:
    """A tensor of numpy-order ``shape`` and ``dtype`` ("float32" or "int32") in context ``ctx``."""
    ne = ne_of(shape)
    t = lib.ggml_new_tensor(ctx.ptr, INPUT_TYPES[dtype], lib.GGML_MAX_DIMS, ffi.new("int64_t[4]", ne))
    lib.ggml_set_name(t, name.encode())
    return Tensor(t, ctx, ctx, len(shape))
