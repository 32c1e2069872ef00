"""Graph ops (pyggml_opt.ops) against numpy, and ggml's backward pass against finite differences.

Forward: every op of ``nn/ops.py`` is built into a ggml graph, computed on the CPU backend through
``core.Scheduler`` and compared with a float64 numpy reference of the same float32 inputs; shapes
must match exactly (numpy order).

Gradients (support.check_op_gradients): the op is applied to inputs flagged with ``ggml_set_param``;
the loss is ``sum(out * w)`` with fixed random weights ``w`` (a plain ``sum`` would hide errors: the sum
of a softmax row is constant, so its gradient would be 0 whatever ggml computes).
``ggml_build_backward_expand`` adds the backward graph, ``ggml_graph_reset`` seeds d loss = 1, the
scheduler computes it, and ``ggml_graph_get_grad`` gives each input's gradient. The reference is a
central finite difference of the float64 numpy version of the same function.

Tolerances (why they are what they are):
  * ggml computes in float32 (eps 1.2e-7). The graphs here are at most ~20 ops deep with reductions
    over <= 150 terms, and ggml's SIMD exp/log are accurate to a few ulp, so float32 results carry
    relative errors of order 1e-6..1e-5. Forward checks use rtol 2e-5 (element-wise ops) or
    1e-4 (composed ops and reductions), with a small atol for values near 0.
  * Finite differences are taken in float64 with h = 1e-6: truncation error ~h^2 |f'''| ~ 1e-12 and
    cancellation ~1e-16 / h ~ 1e-10, negligible; so the gradient tolerance is set by float32:
    rtol 1e-4 and atol 1e-5 x max|grad| (the errors seen are ~1e-7 of max|grad|, so this leaves a
    100x margin). A wrong backward formula is off by O(1), far outside it.
"""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pyggml_opt import lib, ops
from pyggml_opt.nn import layers as L
from support import check_op_gradients, run_graph

# ---- numpy references (float64) -------------------------------------------------------------------
def np_sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free form


def np_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_layer_norm(x, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def np_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def np_softplus(x):
    return np.logaddexp(0.0, x)


def np_conv2d(x, k, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, w = x.shape
    co, ci, kh, kw = k.shape
    assert c == ci
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, co, oh, ow), dtype=np.result_type(x, k))
    for a in range(kh):
        for b in range(kw):
            patch = xp[:, :, a * dh: a * dh + sh * (oh - 1) + 1: sh, b * dw: b * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("nchw,oc->nohw", patch, k[:, :, a, b])
    return out


def np_pool2d(x, kind, kernel, stride, padding=(0, 0)):
    """ggml's pooling: max ignores padding; avg counts padded cells as zeros (divides by kh*kw)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    windows = np.stack([xp[:, :, a: a + sh * (oh - 1) + 1: sh, b: b + sw * (ow - 1) + 1: sw]
                        for a in range(kh) for b in range(kw)])
    return windows.max(axis=0) if kind == "max" else windows.sum(axis=0) / (kh * kw)


def rng_(seed=0):
    return np.random.default_rng(seed)


# ---- forward ----------------------------------------------------------------------------------------
def _r(*shape, seed=0, scale=1.0):
    return (rng_(seed).standard_normal(shape) * scale).astype(np.float32)


def _pos(*shape, seed=0):
    return rng_(seed).uniform(0.1, 3.0, size=shape).astype(np.float32)


# name: (fn over tensors, numpy reference over float64 arrays, inputs, rtol, atol)
FORWARD_CASES = {
    "add": (ops.add, lambda a, b: a + b, [_r(3, 4), _r(3, 4, seed=1)], 2e-5, 1e-6),
    "add_bias": (ops.add, lambda a, b: a + b, [_r(3, 4), _r(4, seed=1)], 2e-5, 1e-6),
    # ggml broadcasts by repeating b (tiling), not numpy's size-1 broadcasting
    "add_tiled": (ops.add, lambda a, b: a + np.tile(b, (2, 2)), [_r(4, 6), _r(2, 3, seed=1)], 2e-5, 1e-6),
    "add_operator": (lambda a, b: a + b, lambda a, b: a + b, [_r(2, 5), _r(2, 5, seed=1)], 2e-5, 1e-6),
    "sub": (ops.sub, lambda a, b: a - b, [_r(3, 4), _r(3, 4, seed=1)], 2e-5, 1e-6),
    "sub_broadcast": (ops.sub, lambda a, b: a - b, [_r(3, 4), _r(3, 1, seed=1)], 2e-5, 1e-6),
    "sub_operator": (lambda a, b: a - b, lambda a, b: a - b, [_r(2, 5), _r(5, seed=1)], 2e-5, 1e-6),
    "mul": (ops.mul, lambda a, b: a * b, [_r(3, 4), _r(3, 4, seed=1)], 2e-5, 1e-6),
    "mul_broadcast": (ops.mul, lambda a, b: a * b, [_r(2, 3, 4), _r(4, seed=1)], 2e-5, 1e-6),
    "mul_operator": (lambda a, b: a * b, lambda a, b: a * b, [_r(2, 5), _r(2, 5, seed=1)], 2e-5, 1e-6),
    "div": (ops.div, lambda a, b: a / b, [_r(3, 4), _pos(3, 4, seed=1)], 2e-5, 1e-6),
    "div_broadcast": (ops.div, lambda a, b: a / b, [_r(3, 4), _pos(3, 1, seed=1)], 1e-4, 1e-6),
    "div_operator": (lambda a, b: a / b, lambda a, b: a / b, [_r(2, 5), _pos(2, 5, seed=1)], 2e-5, 1e-6),
    "neg_operator": (lambda a: -a, lambda a: -a, [_r(2, 5)], 0, 0),
    "scale": (lambda a: ops.scale(a, 2.5), lambda a: 2.5 * a, [_r(3, 4)], 2e-5, 1e-6),
    "scale_bias": (lambda a: ops.scale(a, -1.5, 0.25), lambda a: -1.5 * a + 0.25, [_r(3, 4)], 2e-5, 1e-6),
    "relu": (ops.relu, lambda a: np.maximum(a, 0), [_r(3, 4)], 0, 0),
    "exp": (ops.exp, np.exp, [_r(3, 4)], 2e-5, 1e-6),
    "log": (ops.log, np.log, [_pos(3, 4)], 2e-5, 1e-6),
    "sqr": (ops.sqr, np.square, [_r(3, 4)], 2e-5, 1e-6),
    "sqrt": (ops.sqrt, np.sqrt, [_pos(3, 4)], 2e-5, 1e-6),
    "neg": (ops.neg, np.negative, [_r(3, 4)], 0, 0),
    "abs": (ops.abs, np.abs, [_r(3, 4)], 0, 0),
    "softplus": (ops.softplus, np_softplus, [_r(3, 4, scale=5)], 2e-5, 1e-6),
    "silu": (ops.silu, lambda a: a * np_sigmoid(a), [_r(3, 4, scale=3)], 2e-5, 1e-6),
    "sigmoid": (ops.sigmoid, np_sigmoid, [_r(3, 5, scale=4)], 1e-4, 1e-6),
    "tanh": (ops.tanh, np.tanh, [_r(3, 5, scale=3)], 1e-4, 1e-6),
    "gelu": (ops.gelu, np_gelu, [_r(3, 5, scale=3)], 1e-4, 1e-6),
    "layer_norm": (ops.layer_norm, np_layer_norm, [_r(4, 9, scale=2)], 1e-4, 1e-5),
    "layer_norm_3d": (lambda a: ops.layer_norm(a, 1e-3), lambda a: np_layer_norm(a, 1e-3), [_r(2, 3, 7)], 1e-4, 1e-5),
    "softmax": (ops.softmax, np_softmax, [_r(4, 6, scale=3)], 1e-4, 1e-7),
    "mean": (ops.mean, lambda a: a.mean(axis=-1, keepdims=True), [_r(3, 7)], 1e-4, 1e-6),
    "sum_rows": (ops.sum_rows, lambda a: a.sum(axis=-1, keepdims=True), [_r(2, 3, 7)], 1e-4, 1e-5),
    "sum": (ops.sum, lambda a: np.array([a.sum()]), [_r(3, 7)], 1e-4, 1e-5),
    "mul_mat": (ops.mul_mat, lambda a, b: b @ a.T, [_r(5, 8), _r(3, 8, seed=1)], 1e-4, 1e-5),
    # a's batch is repeated over b's: b batch i uses a batch i // (b_batches / a_batches)
    "mul_mat_batched": (ops.mul_mat, lambda a, b: b @ np.repeat(a, 2, axis=0).transpose(0, 2, 1),
                        [_r(2, 5, 8), _r(4, 3, 8, seed=1)], 1e-4, 1e-5),
    "linear": (ops.linear, lambda x, w, b: x @ w.T + b, [_r(6, 4), _r(3, 4, seed=1), _r(3, seed=2)], 1e-4, 1e-5),
    "linear_nobias": (ops.linear, lambda x, w: x @ w.T, [_r(6, 4), _r(3, 4, seed=1)], 1e-4, 1e-5),
    "reshape": (lambda a: ops.reshape(a, 4, 6), lambda a: a.reshape(4, 6), [_r(2, 3, 4)], 0, 0),
    "reshape_minus1": (lambda a: ops.reshape(a, (2, -1, 2)), lambda a: a.reshape(2, -1, 2), [_r(2, 3, 4)], 0, 0),
    "reshape_4d": (lambda a: ops.reshape(a, 1, 2, 3, 4), lambda a: a.reshape(1, 2, 3, 4), [_r(6, 4)], 0, 0),
    "permute_2d": (lambda a: ops.permute(a, 1, 0), lambda a: a.T, [_r(3, 4)], 0, 0),
    "permute_3d": (lambda a: ops.permute(a, (2, 0, 1)), lambda a: a.transpose(2, 0, 1), [_r(2, 3, 4)], 0, 0),
    "permute_4d": (lambda a: ops.permute(a, 0, 2, 3, 1), lambda a: a.transpose(0, 2, 3, 1), [_r(2, 3, 4, 5)], 0, 0),
    "permute_then_reshape": (lambda a: ops.reshape(ops.permute(a, 1, 0), 12), lambda a: a.T.reshape(12),
                             [_r(3, 4)], 0, 0),
    "cont": (lambda a: ops.cont(ops.permute(a, 1, 0)), lambda a: np.ascontiguousarray(a.T), [_r(3, 4)], 0, 0),
    # ops after permute (most ggml ops assert contiguous rows; permute hands them a contiguous copy)
    "permute_then_exp": (lambda a: ops.exp(ops.permute(a, 1, 0)), lambda a: np.exp(a.T), [_r(3, 4)], 2e-5, 1e-6),
    "permute_then_softmax": (lambda a: ops.softmax(ops.permute(a, 1, 0)), lambda a: np_softmax(a.T), [_r(3, 4)],
                             1e-4, 1e-7),
    "permute_then_add": (lambda a: ops.add(ops.permute(a, 1, 0), ops.permute(a, 1, 0)), lambda a: 2 * a.T,
                         [_r(3, 4)], 0, 0),
    "permute_then_mul_mat": (lambda a, b: ops.mul_mat(a, ops.permute(b, 1, 0)), lambda a, b: b.T @ a.T,
                             [_r(5, 3), _r(3, 4, seed=1)], 1e-4, 1e-5),
    "permute_then_sum": (lambda a: ops.sum(ops.permute(a, 2, 0, 1)), lambda a: np.array([a.sum()]), [_r(2, 3, 4)],
                         1e-4, 1e-5),
    "flatten": (ops.flatten, lambda a: a.reshape(2, -1), [_r(2, 3, 4, 5)], 0, 0),
    "conv_2d": (ops.conv_2d, np_conv2d, [_r(2, 3, 7, 6), _r(4, 3, 3, 3, seed=1)], 1e-4, 1e-5),
    "conv_2d_stride_pad": (lambda x, k: ops.conv_2d(x, k, stride=2, padding=1),
                           lambda x, k: np_conv2d(x, k, (2, 2), (1, 1)),
                           [_r(2, 2, 7, 8), _r(3, 2, 3, 3, seed=1)], 1e-4, 1e-5),
    "conv_2d_rect_dilation": (lambda x, k: ops.conv_2d(x, k, stride=(1, 2), padding=(2, 1), dilation=(2, 1)),
                              lambda x, k: np_conv2d(x, k, (1, 2), (2, 1), (2, 1)),
                              [_r(1, 2, 6, 7), _r(3, 2, 3, 2, seed=1)], 1e-4, 1e-5),
    "max_pool": (lambda x: ops.pool_2d(x, "max", 2), lambda x: np_pool2d(x, "max", (2, 2), (2, 2)),
                 [_r(2, 3, 6, 4)], 0, 0),
    "max_pool_odd": (lambda x: ops.pool_2d(x, "max", 2), lambda x: np_pool2d(x, "max", (2, 2), (2, 2)),
                     [_r(1, 2, 7, 5)], 0, 0),
    "max_pool_overlap_pad": (lambda x: ops.pool_2d(x, "max", 3, stride=2, padding=1),
                             lambda x: np_pool2d(x, "max", (3, 3), (2, 2), (1, 1)), [_r(1, 2, 6, 7)], 0, 0),
    "avg_pool": (lambda x: ops.pool_2d(x, "avg", (2, 3)), lambda x: np_pool2d(x, "avg", (2, 3), (2, 3)),
                 [_r(2, 3, 6, 6)], 2e-5, 1e-6),
    "avg_pool_pad": (lambda x: ops.pool_2d(x, "avg", 3, stride=1, padding=1),
                     lambda x: np_pool2d(x, "avg", (3, 3), (1, 1), (1, 1)), [_r(1, 2, 5, 4)], 2e-5, 1e-6),
}


@pytest.mark.parametrize("name", sorted(FORWARD_CASES))
def test_forward_matches_numpy(sched, name):
    fn, ref, inputs, rtol, atol = FORWARD_CASES[name]
    out, out_shape, _ = run_graph(sched, fn, inputs)
    expected = np.asarray(ref(*[a.astype(np.float64) for a in inputs]))
    assert out_shape == expected.shape, f"{name}: op reports shape {out_shape}, numpy gives {expected.shape}"
    assert out.shape == expected.shape
    assert out.dtype == np.float32
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=atol)


def test_forward_layers_match_numpy(sched):
    """The layers of nn/layers (shapes from infer, values from forward)."""
    x = _r(2, 2, 6, 6)
    k, b = _r(3, 2, 3, 3, seed=1), _r(3, 1, 1, seed=2)
    conv = L.Conv2d(2, 3, 3, padding=1)
    assert conv.infer((2, 6, 6)) == L.LayerShapes((3, 6, 6), {"kernel": (3, 2, 3, 3), "bias": (3, 1, 1)})
    out, shape, _ = run_graph(sched, lambda x, k, b: conv.forward(x, {"kernel": k, "bias": b}), [x, k, b])
    assert shape == (2, 3, 6, 6)
    np.testing.assert_allclose(out, np_conv2d(x.astype(np.float64), k, padding=(1, 1)) + b, rtol=1e-4, atol=1e-5)

    ln = L.LayerNorm(5)
    xl, w, bb = _r(3, 5, seed=3), _r(5, seed=4), _r(5, seed=5)
    assert ln.infer((5,)).params == {"weight": (5,), "bias": (5,)}
    out, shape, _ = run_graph(sched, lambda x, w, b: ln.forward(x, {"weight": w, "bias": b}), [xl, w, bb])
    assert shape == (3, 5)
    np.testing.assert_allclose(out, np_layer_norm(xl.astype(np.float64)) * w + bb, rtol=1e-4, atol=1e-5)

    rs = L.Reshape((1, 4, 4))
    assert rs.output_shape((16,)) == (1, 4, 4)
    xr = _r(3, 16)
    out, shape, _ = run_graph(sched, lambda x: rs.forward(x, {}), [xr])
    assert shape == (3, 1, 4, 4)
    np.testing.assert_array_equal(out, xr.reshape(3, 1, 4, 4))

    for layer, ref in ((L.Sigmoid(), np_sigmoid), (L.Tanh(), np.tanh), (L.GELU(), np_gelu),
                       (L.ReLU(), lambda a: np.maximum(a, 0)), (L.SiLU(), lambda a: a * np_sigmoid(a)),
                       (L.Softmax(), np_softmax)):
        xa = _r(4, 7, seed=6, scale=3)
        out, shape, _ = run_graph(sched, lambda x: layer.forward(x, {}), [xa])
        assert shape == (4, 7)
        np.testing.assert_allclose(out, ref(xa.astype(np.float64)), rtol=1e-4, atol=1e-6, err_msg=repr(layer))


LARGE = np.concatenate([np.linspace(-30, 30, 61), [-30.0, -29.5, 29.5, 30.0, -1e-3, 1e-3]]).astype(np.float32).reshape(1, -1)


@pytest.mark.parametrize("name,fn,ref", [("sigmoid", ops.sigmoid, np_sigmoid), ("tanh", ops.tanh, np.tanh),
                                         ("gelu", ops.gelu, np_gelu)])
def test_large_magnitude_forward_is_finite(sched, name, fn, ref):
    out, _, _ = run_graph(sched, fn, [LARGE])
    assert np.isfinite(out).all(), f"{name} produced NaN/inf for |x| <= 30"
    np.testing.assert_allclose(out, ref(LARGE.astype(np.float64)), rtol=1e-4, atol=1e-6)
    if name != "gelu":
        lo = -1.0 if name == "tanh" else 0.0
        assert (out >= lo).all() and (out <= 1.0).all()


# ---- gradients --------------------------------------------------------------------------------------
GRAD_CASES = {
    "sigmoid": (ops.sigmoid, np_sigmoid, [_r(3, 6, scale=3)]),
    "tanh": (ops.tanh, np.tanh, [_r(3, 6, scale=2)]),
    "gelu": (ops.gelu, np_gelu, [_r(3, 6, scale=2)]),
    "layer_norm": (ops.layer_norm, np_layer_norm, [_r(3, 8, scale=2)]),
    "layer_norm_3d_eps": (lambda a: ops.layer_norm(a, 1e-2), lambda a: np_layer_norm(a, 1e-2), [_r(2, 2, 5)]),
    "softmax": (ops.softmax, np_softmax, [_r(3, 6, scale=2)]),
    "linear": (ops.linear, lambda x, w, b: x @ w.T + b, [_r(5, 4), _r(3, 4, seed=1), _r(3, seed=2)]),
    "mul_mat_batched": (ops.mul_mat, lambda a, b: b @ np.repeat(a, 2, axis=0).transpose(0, 2, 1),
                        [_r(2, 3, 4), _r(4, 2, 4, seed=1)]),
    "sub_broadcast": (ops.sub, lambda a, b: a - b, [_r(3, 4), _r(3, 1, seed=1)]),
    "div_broadcast": (ops.div, lambda a, b: a / b, [_r(3, 4), _pos(3, 1, seed=1)]),
    "mul_broadcast": (ops.mul, lambda a, b: a * b, [_r(2, 3, 4), _r(4, seed=1)]),
    "conv_2d": (ops.conv_2d, np_conv2d, [_r(2, 2, 5, 6), _r(3, 2, 3, 3, seed=1)]),
    "conv_2d_stride_pad": (lambda x, k: ops.conv_2d(x, k, stride=2, padding=1),
                           lambda x, k: np_conv2d(x, k, (2, 2), (1, 1)), [_r(1, 2, 6, 5), _r(2, 2, 3, 3, seed=1)]),
    "conv_2d_dilation": (lambda x, k: ops.conv_2d(x, k, dilation=(2, 1), padding=(1, 0)),
                         lambda x, k: np_conv2d(x, k, (1, 1), (1, 0), (2, 1)), [_r(1, 2, 6, 5), _r(2, 2, 2, 3, seed=1)]),
    "max_pool": (lambda x: ops.pool_2d(x, "max", 2), lambda x: np_pool2d(x, "max", (2, 2), (2, 2)), [_r(2, 2, 4, 6)]),
    "avg_pool": (lambda x: ops.pool_2d(x, "avg", 2), lambda x: np_pool2d(x, "avg", (2, 2), (2, 2)), [_r(2, 2, 4, 6)]),
    "max_pool_overlap": (lambda x: ops.pool_2d(x, "max", 3, stride=2), lambda x: np_pool2d(x, "max", (3, 3), (2, 2)),
                         [_r(1, 2, 7, 7)]),
    "avg_pool_overlap": (lambda x: ops.pool_2d(x, "avg", 3, stride=2), lambda x: np_pool2d(x, "avg", (3, 3), (2, 2)),
                         [_r(1, 2, 7, 7)]),
    "max_pool_pad": (lambda x: ops.pool_2d(x, "max", 3, stride=2, padding=1),
                     lambda x: np_pool2d(x, "max", (3, 3), (2, 2), (1, 1)), [_r(1, 2, 6, 5)]),
    "avg_pool_pad": (lambda x: ops.pool_2d(x, "avg", 3, stride=1, padding=1),
                     lambda x: np_pool2d(x, "avg", (3, 3), (1, 1), (1, 1)), [_r(1, 2, 5, 4)]),
    # permute gives a contiguous copy; gradients through it, also with several users of the input
    "permute_softmax": (lambda a: ops.softmax(ops.permute(a, 1, 0)), lambda a: np_softmax(a.T), [_r(3, 4)]),
    "permute_twice_same_input": (lambda a: ops.add(ops.permute(a, 1, 0), ops.permute(a, 1, 0)),
                                 lambda a: 2 * a.T, [_r(3, 4)]),
    "permute_and_direct_use": (lambda a: ops.mul(ops.permute(a, 1, 0), a), lambda a: a.T * a, [_r(3, 3)]),
    "permute_3d_linear": (lambda x, w: ops.linear(ops.permute(x, 0, 2, 1), w),
                          lambda x, w: x.transpose(0, 2, 1) @ w.T, [_r(2, 3, 4), _r(2, 3, seed=1)]),
    "permute_elementwise_chain": (lambda a: ops.layer_norm(ops.exp(ops.permute(a, (1, 0)))),
                                  lambda a: np_layer_norm(np.exp(a.T)), [_r(4, 3)]),
    # ggml's own backward passes of the remaining ops, as used through this module
    "relu": (ops.relu, lambda a: np.maximum(a, 0), [_r(3, 5)]),
    "abs": (ops.abs, np.abs, [_r(3, 5)]),
    "exp": (ops.exp, np.exp, [_r(3, 5)]),
    "log": (ops.log, np.log, [_pos(3, 5)]),
    "sqrt": (ops.sqrt, np.sqrt, [_pos(3, 5)]),
    "sqr": (ops.sqr, np.square, [_r(3, 5)]),
    "neg": (ops.neg, np.negative, [_r(3, 5)]),
    "softplus": (ops.softplus, np_softplus, [_r(3, 5, scale=3)]),
    "silu": (ops.silu, lambda a: a * np_sigmoid(a), [_r(3, 5, scale=2)]),
    "scale_bias": (lambda a: ops.scale(a, -1.5, 0.3), lambda a: -1.5 * a + 0.3, [_r(3, 5)]),
    "sum_rows": (ops.sum_rows, lambda a: a.sum(-1, keepdims=True), [_r(3, 5)]),
    "mean": (ops.mean, lambda a: a.mean(-1, keepdims=True), [_r(3, 5)]),
    "sum": (ops.sum, lambda a: np.array([a.sum()]), [_r(3, 5)]),
    "sub": (ops.sub, lambda a, b: a - b, [_r(3, 5), _r(3, 5, seed=1)]),
    "div": (ops.div, lambda a, b: a / b, [_r(3, 5), _pos(3, 5, seed=1)]),
    "add_tiled": (ops.add, lambda a, b: a + np.tile(b, (2, 2)), [_r(4, 6), _r(2, 3, seed=1)]),
    "mul_tiled": (ops.mul, lambda a, b: a * np.tile(b, (2, 2)), [_r(4, 6), _r(2, 3, seed=1)]),
    "reshape": (lambda a: ops.reshape(a, 5, 3), lambda a: a.reshape(5, 3), [_r(3, 5)]),
    "mul_mat_same_input": (lambda a: ops.mul_mat(a, a), lambda a: a @ a.T, [_r(4, 5)]),
    "flatten_linear": (lambda x, w: ops.linear(ops.flatten(x), w),
                       lambda x, w: x.reshape(2, -1) @ w.T, [_r(2, 2, 3, 2), _r(3, 12, seed=1)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_matches_finite_differences(sched, name):
    fn, ref, inputs = GRAD_CASES[name]
    check_op_gradients(sched, fn, ref, inputs)


@pytest.mark.parametrize("name,fn,ref", [("sigmoid", ops.sigmoid, np_sigmoid), ("tanh", ops.tanh, np.tanh),
                                         ("gelu", ops.gelu, np_gelu)])
def test_large_magnitude_gradients_are_finite(sched, name, fn, ref):
    """|x| up to 30: the composed forms saturate without NaN/inf in the forward or backward pass."""
    check_op_gradients(sched, fn, ref, [LARGE])


def test_layer_norm_affine_gradients(sched):
    """LayerNorm with its learnt weight and bias: gradients for the input and both parameters."""
    ln = L.LayerNorm(6)
    x, w, b = _r(4, 6, scale=2), (1 + 0.3 * _r(6, seed=1)), 0.5 * _r(6, seed=2)
    check_op_gradients(sched, lambda x, w, b: ln.forward(x, {"weight": w, "bias": b}),
               lambda x, w, b: np_layer_norm(x) * w + b, [x, w, b])


def test_conv2d_layer_gradients(sched):
    """Conv2d layer (kernel and the (out, 1, 1) bias broadcast over the feature maps)."""
    conv = L.Conv2d(2, 3, 3, padding=1)
    x, k, b = _r(2, 2, 4, 5), _r(3, 2, 3, 3, seed=1), _r(3, 1, 1, seed=2)
    check_op_gradients(sched, lambda x, k, b: conv.forward(x, {"kernel": k, "bias": b}),
               lambda x, k, b: np_conv2d(x, k, padding=(1, 1)) + b, [x, k, b])


def test_small_cnn_gradients(sched):
    """A chain as in a CNN: conv -> relu -> max pool -> flatten -> linear, gradients for every weight."""
    x, k, w = _r(2, 1, 6, 6), _r(2, 1, 3, 3, seed=1), _r(3, 8, seed=2)

    def f(x, k, w):
        return ops.linear(ops.flatten(ops.pool_2d(ops.relu(ops.conv_2d(x, k)), "max", 2)), w)

    def ref(x, k, w):
        h = np_pool2d(np.maximum(np_conv2d(x, k), 0), "max", (2, 2), (2, 2))
        return h.reshape(2, -1) @ w.T

    check_op_gradients(sched, f, ref, [x, k, w], grad_of=(1, 2))


# ---- ops without a backward pass: a Python error naming the op, never an abort ----------------------
NO_BACKWARD_SCRIPT = textwrap.dedent("""
    import numpy as np
    import pyggml_opt as pgo
    from pyggml_opt import lib
    from pyggml_opt.nn.ops import Tensor

    def raw(fn_name):
        fn = getattr(lib, fn_name)
        def op(t):
            return Tensor(fn(t.ctx.ptr, t.ptr), t.ctx, t.ctx, t.ndim)
        return op

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.integers(0, 3, 16)
    for fn_name, op_name in [("ggml_elu", "ELU"), ("ggml_gelu_quick", "GELU_QUICK"), ("ggml_hardsigmoid", "HARDSIGMOID"),
                             ("ggml_gelu_erf", "GELU_ERF")]:
        op = raw(fn_name)
        model = pgo.FunctionModel(lambda x, p, op=op: pgo.ops.linear(op(pgo.ops.linear(x, p["w1"])), p["w2"]),
                                  {"w1": (5, 4), "w2": (3, 5)})
        try:
            model.fit(x, y, epochs=1, batch_size=8, verbose=0)
        except ValueError as exc:
            assert op_name in str(exc), (op_name, str(exc))
            print("REFUSED", op_name, "|", exc)
        else:
            raise SystemExit(f"fit accepted {fn_name} on a trainable path")
        # the model is still usable for inference: forward-only graphs need no backward pass
        assert model.predict(x).shape == (16, 3)

    # ggml's MEAN backward aborts when its input has another user (ggml_add1 on a non-scalar):
    # refused by name; pgo.ops.mean (sum_rows * 1/n) is the differentiable form
    mean_raw = lambda t: Tensor(lib.ggml_mean(t.ctx.ptr, t.ptr), t.ctx, t.ctx, t.ndim)
    def two_users(x, p):
        h = pgo.ops.linear(x, p["w1"])
        return pgo.ops.linear(pgo.ops.add(h, mean_raw(h)), p["w2"])
    model = pgo.FunctionModel(two_users, {"w1": (5, 4), "w2": (3, 5)})
    try:
        model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    except ValueError as exc:
        assert "MEAN" in str(exc), str(exc)
        print("REFUSED MEAN |", exc)
    else:
        raise SystemExit("fit accepted ggml_mean with a second user of its input")
    one_user = lambda x, p: pgo.ops.linear(pgo.ops.add(pgo.ops.linear(x, p["w1"]), mean_raw(pgo.ops.linear(x, p["u"]))),
                                           p["w2"])
    h = pgo.FunctionModel(one_user, {"w1": (5, 4), "u": (5, 4), "w2": (3, 5)}).fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert np.isfinite(h["loss"]).all()
    print("MEAN ONE USER OK")

    # an op without backward before any parameter (on the input only) needs no gradient: allowed
    op = raw("ggml_elu")
    model = pgo.FunctionModel(lambda x, p: pgo.ops.linear(op(x), p["w"]), {"w": (3, 4)})
    h = model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert len(h["loss"]) == 2 and np.isfinite(h["loss"]).all()
    print("INPUT-ONLY OK")
""")


def test_op_without_backward_raises_value_error_naming_it():
    proc = subprocess.run([sys.executable, "-c", NO_BACKWARD_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for op_name in ("ELU", "GELU_QUICK", "HARDSIGMOID", "GELU_ERF", "MEAN"):
        assert f"REFUSED {op_name}" in proc.stdout
    assert "INPUT-ONLY OK" in proc.stdout and "MEAN ONE USER OK" in proc.stdout


@pytest.mark.parametrize("op,ref", [(ops.sum, lambda a: a.sum().reshape(1)),
                                    (ops.sum_rows, lambda a: a.sum(axis=-1, keepdims=True)),
                                    (ops.mean, lambda a: a.mean(axis=-1, keepdims=True))])
def test_reductions_of_a_strided_view(sched, op, ref):
    """ggml's CPU SUM / SUM_ROWS read a strided view (a transpose) as if it were contiguous; the ops
    make it contiguous first, so the result is the view's sum, not the memory's row order."""
    a = _r(5, 3, seed=7)

    def fn(t):
        view = ops.wrap(lib.ggml_transpose(t.ctx.ptr, t.ptr), t)  # numpy shape (3, 5), strided
        assert not lib.ggml_is_contiguous(view.ptr)
        return op(view)

    out, _, _ = run_graph(sched, fn, [a])
    np.testing.assert_allclose(out.reshape(-1), ref(a.T.astype(np.float64)).reshape(-1), rtol=1e-5)


def test_padding_mask_hides_padded_keys(sched):
    # row 0 has 3 tokens then padding (id 0), row 1 has none: its output must equal attention over the
    # first 3 keys only, and no value may be NaN (a fully padded key set would still be finite)
    ids = np.array([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]], np.float32)
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 2, 6, 4)) for _ in range(3))

    def fn(x, tq, tk, tv):
        return ops.attention(tq, tk, tv, causal=False, mask=ops.padding_mask(ops.to_int32(x)))

    got, shape, _ = run_graph(sched, fn, [ids, q, k, v])
    assert shape == (2, 2, 6, 4)
    for row, keep in ((0, 3), (1, 6)):
        s = q[row] @ k[row, :, :keep].transpose(0, 2, 1) / 2.0
        a = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(got[row], (a / a.sum(-1, keepdims=True)) @ v[row, :, :keep], rtol=0, atol=1e-5)


# ---- a value picked per row (the token-id cross-entropy's target logits) ------------------------------
PICK_IDS = np.array([3, 0, 6, 6, 1], np.float32)  # (5,) ids into rows of 7, a repeated one among them


def np_log_sum_exp(a):
    m = a.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(a - m).sum(axis=-1, keepdims=True))


def test_pick_matches_numpy_and_finite_differences(sched):
    """ops.pick is a[i, ids[i]] (n, 1) and its gradient puts each row's gradient on its picked value
    alone (vendor patch 0042: the backward pass of a batched GET_ROWS)."""
    a = np.random.default_rng(5).normal(size=(5, 7)).astype(np.float32)

    def fn(x, ids):
        return ops.pick(x, ops.to_int32(ids))

    out, shape, _ = run_graph(sched, fn, [a, PICK_IDS])
    assert shape == (5, 1)
    np.testing.assert_array_equal(out[:, 0], a[np.arange(5), PICK_IDS.astype(int)])  # a copy: exact
    grads = check_op_gradients(sched, fn, lambda x, ids: x[np.arange(5), ids.astype(int)][:, None],
                               [a, PICK_IDS], grad_of=(0,))
    untouched = np.ones_like(a, dtype=bool)
    untouched[np.arange(5), PICK_IDS.astype(int)] = False
    assert (grads[0][untouched] == 0).all()


def test_token_cross_entropy_graph_matches_float64(sched):
    """Per token: log-sum-exp of the logits minus the target's logit, built from log_sum_exp and pick;
    value and gradient against float64 numpy (the tolerances of the module's docstring)."""
    a = np.random.default_rng(6).normal(scale=3.0, size=(5, 7)).astype(np.float32)

    def fn(x, ids):
        shifted, log_denominator = ops.log_sum_exp(x)
        return ops.sub(log_denominator, ops.pick(shifted, ops.to_int32(ids)))

    def ref(x, ids):
        return np_log_sum_exp(x) - x[np.arange(5), ids.astype(int)][:, None]

    out, shape, _ = run_graph(sched, fn, [a, PICK_IDS])
    assert shape == (5, 1)
    np.testing.assert_allclose(out, ref(a.astype(np.float64), PICK_IDS), rtol=1e-5, atol=1e-6)
    check_op_gradients(sched, fn, ref, [a, PICK_IDS], grad_of=(0,))


CE_IDS = np.array([3, -1, 6, 6, 7], np.float32)  # (5,) ids into rows of 7: an ignored one (-1), one past them


def ce_ids_ref(x, ids):
    """float64 reference of ops.cross_entropy_ids: 0 where the id is outside [0, k)."""
    valid = (ids >= 0) & (ids < x.shape[1])
    picked = x[np.arange(len(ids)), np.where(valid, ids, 0).astype(int)]
    return np.where(valid, np_log_sum_exp(x)[:, 0] - picked, 0.0)


def test_cross_entropy_ids_matches_float64(sched):
    """ops.cross_entropy_ids (vendor patch 0045: one node each way): each row's log-sum-exp minus its
    target's logit, 0 with a zero gradient row where the id is outside [0, k); value and gradient
    against float64 numpy (the tolerances of the module's docstring)."""
    a = np.random.default_rng(6).normal(scale=3.0, size=(5, 7)).astype(np.float32)

    def fn(x, ids):
        return ops.cross_entropy_ids(x, ops.to_int32(ids))

    out, shape, _ = run_graph(sched, fn, [a, CE_IDS])
    assert shape == (5,)
    np.testing.assert_allclose(out, ce_ids_ref(a.astype(np.float64), CE_IDS), rtol=1e-5, atol=1e-6)
    grads = check_op_gradients(sched, fn, ce_ids_ref, [a, CE_IDS], grad_of=(0,))
    assert (grads[0][[1, 4]] == 0).all()  # ignored targets: no gradient at all
    # (n, T, k) logits with (n, T) ids, as a language model's outputs: the same rows
    out3, shape3, _ = run_graph(sched, fn, [np.concatenate([a, a])[:9].reshape(3, 3, 7), np.tile(CE_IDS, 2)[:9].reshape(3, 3)])
    assert shape3 == (3, 3)
    np.testing.assert_allclose(out3.ravel(), np.tile(out, 2)[:9], rtol=1e-6)


def test_cross_entropy_ids_over_a_large_vocabulary(sched):
    """Qwen's 151,936 classes: with the row's sum of exponentials in float64 the value is within float32
    rounding of the float64 reference."""
    a = np.random.default_rng(7).normal(scale=4.0, size=(3, 151_936)).astype(np.float32)
    ids = np.array([0, 151_935, 77_777], np.float32)
    out, _, _ = run_graph(sched, lambda x, i: ops.cross_entropy_ids(x, ops.to_int32(i)), [a, ids])
    np.testing.assert_allclose(out, ce_ids_ref(a.astype(np.float64), ids), rtol=2e-6)


@pytest.mark.parametrize("shape, ids, error", [
    ((5, 7), np.zeros(4, np.float32), TypeError),     # one id too few
    ((5, 7, 2), np.zeros(5, np.float32), TypeError),   # ids of another leading shape than the logits
    ((7,), np.zeros(1, np.float32), ValueError),        # no axis of rows
])
def test_cross_entropy_ids_refuses_mismatched_input(sched, shape, ids, error):
    with pytest.raises(error, match="cross_entropy_ids"):
        run_graph(sched, lambda x, i: ops.cross_entropy_ids(x, ops.to_int32(i)), [np.zeros(shape, np.float32), ids])


@pytest.mark.parametrize("ids, shape, error", [
    (np.zeros(4, np.float32), (5, 7), TypeError),   # one id too few
    (np.zeros(5, np.float32), (5, 7, 1), ValueError),  # not a (n, k) tensor
])
def test_pick_refuses_mismatched_ids(sched, ids, shape, error):
    a = np.zeros(shape, np.float32)
    with pytest.raises(error, match="pick"):
        run_graph(sched, lambda x, i: ops.pick(x, ops.to_int32(i)), [a, ids])


def test_pick_refuses_float_ids(sched):
    with pytest.raises(TypeError, match="int32"):
        run_graph(sched, lambda x, i: ops.pick(x, i), [np.zeros((5, 7), np.float32), PICK_IDS])
