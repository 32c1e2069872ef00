"""Frozen F16 and quantized (Q8_0, Q4_0) weights on the CPU: ``mul_mat`` forward, and the gradient into
the f32 operand through them (ggml's backward pass of MUL_MAT: an OUT_PROD with the frozen weight as
src0, on the CPU since ggml 0.16), against float64 numpy.

References model what ggml computes, so the tolerances are float32 accumulation only:
  * the weight is ggml's own dequantization of the stored blocks (``type_traits.to_float``);
  * forward: ggml converts x to the weight's dot-product type first (F16 for an F16 weight, Q8_0 for
    Q8_0 and Q4_0), so the reference uses x rounded the same way (ggml's own quantization);
  * backward: OUT_PROD dequantizes rows of the weight and multiplies them with the f32 output
    gradient, so the reference is W_deq^T @ dy, with no rounding of dy.
Sums run over 64 terms of |w x| <= ~10: float32 errors ~64 * 6e-8 * 10 = 4e-5 at most; rtol 1e-5 and
atol 1e-4 leave room, while rounding x the wrong way (or not at all) is off by ~1e-3 and more.
"""
from __future__ import annotations

import numpy as np
import pytest

from pyggml_opt._lib import ffi, lib
from pyggml_opt.core import Buffer, Context, Scheduler, tensor_data

N_IN, N_OUT, BATCH = 64, 16, 5  # N_IN a multiple of the 32-value blocks of Q8_0 / Q4_0
TYPES = {"f16": lib.GGML_TYPE_F16, "q8_0": lib.GGML_TYPE_Q8_0, "q4_0": lib.GGML_TYPE_Q4_0}


def _encode(type_: int, a: np.ndarray) -> bytes:
    """``a`` (rows of float32) stored as ggml type ``type_`` (ggml's own conversion)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    rows, n = a.shape
    size = lib.ggml_row_size(type_, n) * rows
    dst = ffi.new("char[]", size)
    src = ffi.from_buffer("float[]", a)
    written = lib.ggml_quantize_chunk(type_, src, dst, 0, rows, n, ffi.NULL)
    assert written == size
    return ffi.buffer(dst, size)[:]


def _decode(type_: int, data: bytes, shape: tuple[int, int]) -> np.ndarray:
    out = np.empty(shape, dtype=np.float32)
    lib.ggml_get_type_traits(type_).to_float(ffi.from_buffer(data), ffi.from_buffer("float[]", out), out.size)
    return out.astype(np.float64)


@pytest.fixture(scope="module")
def sched():
    s = Scheduler.for_device("cpu", n_threads=2)
    yield s
    s.close()


@pytest.mark.parametrize("name", list(TYPES))
def test_frozen_weight_forward_and_gradient_into_f32_operand(sched, name):
    type_ = TYPES[name]
    rng = np.random.default_rng(list(TYPES).index(name))
    w = rng.standard_normal((N_OUT, N_IN)).astype(np.float32)
    x = rng.standard_normal((BATCH, N_IN)).astype(np.float32)
    r = rng.standard_normal((BATCH, N_OUT)).astype(np.float32)  # loss = sum(y * r): dL/dy = r
    w_data = _encode(type_, w)

    ctx = Context(16, graph_size=64, grads=True)
    wt = lib.ggml_new_tensor_2d(ctx.ptr, type_, N_IN, N_OUT)  # frozen: no ggml_set_param
    xt = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, N_IN, BATCH)
    lib.ggml_set_param(xt)
    rt = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, N_OUT, BATCH)
    y = lib.ggml_mul_mat(ctx.ptr, wt, xt)
    lib.ggml_set_output(y)
    loss = lib.ggml_sum(ctx.ptr, lib.ggml_mul(ctx.ptr, y, rt))
    lib.ggml_set_loss(loss)
    gf = lib.ggml_new_graph_custom(ctx.ptr, 64, True)
    lib.ggml_build_forward_expand(gf, loss)
    lib.ggml_build_backward_expand(ctx.ptr, gf, ffi.NULL)
    grad = lib.ggml_graph_get_grad(gf, xt)
    assert grad != ffi.NULL
    assert lib.ggml_graph_get_grad(gf, wt) == ffi.NULL  # nothing flows into the frozen weight
    out_prods = [lib.ggml_graph_node(gf, i) for i in range(lib.ggml_graph_n_nodes(gf))
                 if lib.ggml_graph_node(gf, i).op == lib.GGML_OP_OUT_PROD]
    assert [n.src[0].type for n in out_prods] == [type_]  # the backward pass is an OUT_PROD of the weight
    buf = Buffer(ctx, sched.main)
    try:
        lib.ggml_backend_tensor_set(wt, w_data, 0, len(w_data))
        tensor_data.set(xt, x)
        tensor_data.set(rt, r)
        lib.ggml_graph_reset(gf)
        sched.compute(gf)
        y_got = tensor_data.get(y, 2)
        g_got = tensor_data.get(grad, 2)
    finally:
        buf.close()
        ctx.close()

    w_deq = _decode(type_, w_data, w.shape)
    dot_type = lib.GGML_TYPE_F16 if type_ == lib.GGML_TYPE_F16 else lib.GGML_TYPE_Q8_0
    x_dot = _decode(dot_type, _encode(dot_type, x), x.shape)
    assert y_got.shape == (BATCH, N_OUT) and g_got.shape == (BATCH, N_IN)
    np.testing.assert_allclose(y_got, x_dot @ w_deq.T, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(g_got, r.astype(np.float64) @ w_deq, rtol=1e-5, atol=1e-4)
    # the stored weight really is coarser than float32 (else the test would not test the types)
    assert np.abs(w_deq - w).max() > 1e-4
