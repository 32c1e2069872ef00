"""The numerical checks of the kernel and op tests: one central finite-difference routine, the gradient
checks built on it, and one graph runner (leaf tensors, an op or a few on top, computed on the CPU).

Finite differences are central and taken in float64 on float64 functions: with a step ``eps`` of
1e-6 the truncation error is ~eps^2 |f'''| ~ 1e-12 and the cancellation ~1e-16 / eps ~ 1e-10, both
negligible next to the float32 error of what ggml computes; each caller's tolerance is set by the
latter (its own docstring says why).
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from pyggml_opt._lib import ffi, lib
from pyggml_opt.core import Buffer, Context, Scheduler, tensor_data
from pyggml_opt import ops
from pyggml_opt.nn.ops import Tensor

Weights = dict  # name -> float64 numpy array


def finite_differences(loss: Callable[[Weights], float], w0: Weights, name, eps: float,
                       entries: Iterable[tuple] | None = None) -> np.ndarray:
    """Central finite differences of the float64 function ``loss(weights)`` at ``w0`` with respect to
    ``w0[name]``, at ``entries`` (indices; default every entry); NaN at the entries not computed.
    ``loss`` gets float64 copies of ``w0`` whose ``name`` entry is moved by +-eps."""
    w = {k: np.array(v, dtype=np.float64) for k, v in w0.items()}
    x = w[name]
    fd = np.full(x.shape, np.nan)
    for idx in (np.ndindex(x.shape) if entries is None else entries):
        orig = x[idx]
        x[idx] = orig + eps
        up = float(loss(w))
        x[idx] = orig - eps
        down = float(loss(w))
        x[idx] = orig
        fd[idx] = (up - down) / (2 * eps)
    return fd


def check_gradients(loss: Callable[[Weights], float], w0: Weights, got: dict, names, eps: float,
                    tol: float) -> None:
    """``got`` (gradients by parameter name) against central finite differences of the float64
    function ``loss(weights)`` at ``w0``, within ``tol`` absolute, at the first and the last entry of
    each parameter in ``names`` (a layer's gradients are a few formulas applied to every entry)."""
    for name in names:
        ends = [(0,) * w0[name].ndim, tuple(s - 1 for s in w0[name].shape)]
        fd = finite_differences(loss, w0, name, eps, ends)
        for idx in ends:
            assert abs(got[name][idx] - fd[idx]) <= tol, (name, idx, got[name][idx], fd[idx])


class OpGraph:
    """Leaf tensors, an op (or a few) on top, computed on the CPU through a ``Scheduler``: the graph
    runner of the kernel and op tests. Every tensor of the context lives in one CPU buffer, as in
    upstream test-backend-ops's grad mode: no in-place reuse, and a loss gradient can be seeded."""

    _TYPES = {np.dtype(np.float32): lib.GGML_TYPE_F32, np.dtype(np.float16): lib.GGML_TYPE_F16,
              np.dtype(np.int32): lib.GGML_TYPE_I32}

    def __init__(self, n_threads: int = 1, sched: Scheduler | None = None, size: int = 4096,
                 grads: bool = False) -> None:
        self.sched = sched if sched is not None else Scheduler.for_device("cpu", n_threads=n_threads)
        self.size = size
        self.ctx = Context(size, graph_size=size, grads=grads)
        self.leaves: list[tuple[object, np.ndarray]] = []

    def leaf(self, value: np.ndarray, dtype=np.float32):
        """A leaf (``struct ggml_tensor *``) holding numpy ``value`` (numpy order, up to 4-d) as
        float32, or as float16 / int32 if ``dtype`` says so."""
        value = np.ascontiguousarray(value, dtype=dtype)
        t = lib.ggml_new_tensor(self.ctx.ptr, self._TYPES[value.dtype], lib.GGML_MAX_DIMS,
                                ffi.new("int64_t[4]", tensor_data.ne_of(value.shape)))
        self.leaves.append((t, value))
        return t

    def input(self, value: np.ndarray, name: str) -> Tensor:
        """A float32 leaf named ``name`` as a tensor of ``pyggml_opt.ops``."""
        t = self.leaf(value)
        lib.ggml_set_name(t, name.encode())
        return Tensor(t, self.ctx, self.ctx, np.ndim(value))

    def compute(self, *outs, loss=None, grads_of=()):
        """Compute the graph of ``outs`` (tensor pointers); with ``loss`` (a scalar tensor) also its
        backward graph, seeded with d loss = 1, and the gradients of the leaves ``grads_of``. Returns
        the outputs as 4-d numpy arrays (one array for one output), then the gradients if asked."""
        gf = lib.ggml_new_graph_custom(self.ctx.ptr, self.size, loss is not None)
        if loss is not None:
            lib.ggml_set_loss(loss)
            lib.ggml_build_forward_expand(gf, loss)
        for out in outs:
            lib.ggml_set_output(out)
            lib.ggml_build_forward_expand(gf, out)
        grads = []
        if loss is not None:
            lib.ggml_build_backward_expand(self.ctx.ptr, gf, ffi.NULL)
            for t in grads_of:
                g = lib.ggml_graph_get_grad(gf, t)
                assert g != ffi.NULL, f"no gradient for {ffi.string(lib.ggml_get_name(t)).decode()}"
                if not lib.ggml_is_contiguous(g):
                    g = lib.ggml_cont(self.ctx.ptr, g)
                lib.ggml_set_output(g)
                lib.ggml_build_forward_expand(gf, g)
                grads.append(g)
        self.buf = Buffer(self.ctx, self.sched.main)
        for t, value in self.leaves:
            tensor_data.set(t, value)
        if loss is not None:
            lib.ggml_graph_reset(gf)
        self.sched.compute(gf)
        got = [tensor_data.get(out, ndim=4) for out in outs]
        got = got[0] if len(outs) == 1 else got
        return (got, [tensor_data.get(g, ndim=4) for g in grads]) if loss is not None else got


def run_graph(sched: Scheduler, fn, arrays, grad_of=(), weights=None):
    """Compute ``fn(*tensors)`` (built with ``pyggml_opt.ops``) for float32 ``arrays``; with ``grad_of``
    (indices of the arrays that are parameters) also the gradients of sum(out * weights). Returns
    (out, out_tensor_shape, grads by index)."""
    arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]
    g = OpGraph(sched=sched, grads=bool(grad_of))
    ts = [g.input(a, f"in{i}") for i, a in enumerate(arrays)]
    for i in grad_of:
        lib.ggml_set_param(ts[i].ptr)
    out = fn(*ts)
    assert isinstance(out, Tensor)
    read = out if lib.ggml_is_contiguous(out.ptr) else ops.cont(out)
    if not grad_of:
        return g.compute(read.ptr).reshape(out.shape), out.shape, {}
    loss = ops.sum(ops.mul(out, g.input(weights, "w")))
    got, grads = g.compute(read.ptr, loss=loss.ptr, grads_of=[ts[i].ptr for i in grad_of])
    return got.reshape(out.shape), out.shape, {i: gr.reshape(arrays[i].shape) for i, gr in zip(grad_of, grads)}


# Gradients of graph ops: float32 results of graphs at most ~20 ops deep with reductions over <= 150
# terms carry relative errors of order 1e-6..1e-5 (the errors seen are ~1e-7 of max|grad|), so rtol
# 1e-4 and atol 1e-5 x max|grad| leave a 100x margin; a wrong backward formula is off by O(1).
OP_FD_EPS = 1e-6
OP_GRAD_RTOL, OP_GRAD_ATOL_REL = 1e-4, 1e-5


def check_op_gradients(sched: Scheduler, fn, ref, inputs, grad_of=None, seed=123):
    """ggml's backward pass of ``fn`` (built with ``pyggml_opt.ops``) against central finite
    differences of its float64 numpy version ``ref``, for the loss sum(out * w) with fixed random
    weights ``w`` (a plain sum would hide errors: a softmax row sums to a constant), with respect to
    the inputs ``grad_of`` (default all). Returns ggml's gradients by input index."""
    grad_of = tuple(range(len(inputs))) if grad_of is None else tuple(grad_of)
    ref_out = np.asarray(ref(*[a.astype(np.float64) for a in inputs]))
    w = np.random.default_rng(seed).uniform(-1, 1, size=ref_out.shape).astype(np.float32)
    out, _, grads = run_graph(sched, fn, inputs, grad_of=grad_of, weights=w)
    assert np.isfinite(out).all()
    w64 = w.astype(np.float64)
    arrays = {i: a for i, a in enumerate(inputs)}

    def loss(a):
        return float((ref(*[a[j] for j in range(len(inputs))]) * w64).sum())

    for i in grad_of:
        g = grads[i]
        assert g.shape == inputs[i].shape
        assert np.isfinite(g).all(), f"non-finite gradient for input {i}"
        expected = finite_differences(loss, arrays, i, OP_FD_EPS)
        scale = max(np.abs(expected).max(), 1e-3)
        np.testing.assert_allclose(g, expected, rtol=OP_GRAD_RTOL, atol=OP_GRAD_ATOL_REL * scale,
                                   err_msg=f"gradient of input {i}")
    return grads
