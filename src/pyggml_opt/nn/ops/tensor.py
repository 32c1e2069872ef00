"""The symbolic ``Tensor``, its arithmetic and the element-wise ops ggml has built in.

A ``Tensor`` wraps a ``struct ggml_tensor *``. Shapes are in numpy order (batch first), the reverse
of ggml's ``ne``. Ops that create tensors put them in the compute context of the first argument
that has one (parameters have none; the model input has the graph's), so a model is an ordinary
Python function of its input and parameters. Every op checks its arguments' shapes and raises
``ValueError`` before ggml could assert.
"""
from __future__ import annotations

from typing import Callable

from ..._lib import CData, c_str, ffi, lib
from ...core import ClosedError, Context, Handle
from ...core.tensor_data import ne_of, shape_of


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


def clamp(a: Tensor, lo: float, hi: float) -> Tensor:
    """min(max(a, lo), hi) element-wise (ggml_clamp). ggml has no backward pass for it: for values that
    need no gradient (counts, masks); a graph that would differentiate it is refused."""
    check_tensor("a", a)
    if not lo <= hi:
        raise ValueError(f"clamp: lo ({lo}) must not exceed hi ({hi})")
    return wrap(lib.ggml_clamp(graph_context(a).ptr, a.ptr, float(lo), float(hi)), a)


def cont(a: Tensor) -> Tensor:
    """A contiguous copy."""
    check_tensor("a", a)
    return wrap(lib.ggml_cont(graph_context(a).ptr, a.ptr), a)


def contiguous(a: Tensor) -> Tensor:
    """``a`` itself if its elements are contiguous, else a contiguous copy (for ops that read their
    source as contiguous rows, or reshape it)."""
    return a if lib.ggml_is_contiguous(a.ptr) else cont(a)


INPUT_TYPES = {"float32": lib.GGML_TYPE_F32, "int32": lib.GGML_TYPE_I32}


def new_input(ctx: Context, shape: tuple[int, ...], name: str = "input", dtype: str = "float32",
              graph: Context | None = None) -> Tensor:
    """A tensor of numpy-order ``shape`` and ``dtype`` ("float32" or "int32") in context ``ctx``; ops
    on it build in ``graph`` (default ``ctx``): a static graph's inputs live in a context of their own."""
    ne = ne_of(shape)
    t = lib.ggml_new_tensor(ctx.ptr, INPUT_TYPES[dtype], lib.GGML_MAX_DIMS, ffi.new("int64_t[4]", ne))
    lib.ggml_set_name(t, name.encode())
    return Tensor(t, graph if graph is not None else ctx, ctx, len(shape))
