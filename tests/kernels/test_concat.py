"""``ops.concat`` (ggml's CONCAT, with the backward pass of vendor patch 0013): values against
numpy.concatenate, gradients against finite differences, argument checks, and a FunctionModel with a
residual connection and a concatenation that trains.

Tolerances: concatenation copies values, so the forward pass is compared exactly. Gradients are those
of sum(concat(a, b) * w) (support.check_op_gradients: central float64 finite differences, rtol 1e-4,
atol 1e-5 x max|grad|; the exact gradient is a slice of w, so any error is float32 rounding of the
loss's products, ~1e-7).
"""
from __future__ import annotations

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import ops
from pyggml_opt.core import Context
from pyggml_opt.nn.ops import new_input

from support import FAST, check_op_gradients, run_graph

SHAPES = {2: (3, 4), 3: (2, 3, 4), 4: (2, 3, 2, 3)}
CASES = [(nd, axis) for nd in SHAPES for axis in range(-nd, nd)]


def pair(nd, axis, seed=0):
    """Two float32 arrays of SHAPES[nd] that differ in size along ``axis`` (2 and 3)."""
    rng = np.random.default_rng(seed)
    sa, sb = list(SHAPES[nd]), list(SHAPES[nd])
    sa[axis], sb[axis] = 2, 3
    return rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)


def cat(axis):
    return lambda a, b: ops.concat(a, b, axis)


def np_cat(axis):
    return lambda a, b: np.concatenate([a, b], axis=axis)


@pytest.mark.parametrize("nd,axis", CASES)
def test_forward_matches_numpy(sched, nd, axis):
    a, b = pair(nd, axis)
    out, shape, _ = run_graph(sched, cat(axis), [a, b])
    expected = np.concatenate([a, b], axis=axis)
    assert shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("nd,axis", CASES)
def test_gradients_match_finite_differences(sched, nd, axis):
    a, b = pair(nd, axis, seed=1)
    check_op_gradients(sched, cat(axis), np_cat(axis), [a, b])


def test_gradient_of_one_input_and_a_reused_input(sched):
    a, b = pair(2, 1, seed=2)
    check_op_gradients(sched, cat(1), np_cat(1), [a, b], grad_of=(1,))
    # the same tensor on both sides, and used again after: the gradients of its uses add up
    twice = lambda x: ops.mul(ops.concat(x, x, 0), ops.concat(x, ops.exp(x), 0))  # noqa: E731
    check_op_gradients(sched, twice, lambda x: np.concatenate([x, x]) * np.concatenate([x, np.exp(x)]), [a])


def test_bad_arguments_are_refused():
    ctx = Context(16)
    try:
        a, b = new_input(ctx, (2, 3), "a"), new_input(ctx, (2, 4), "b")
        c, d = new_input(ctx, (2, 3, 1), "c"), new_input(ctx, (2, 4), "d", "int32")
        with pytest.raises(ValueError, match="differ outside axis 0"):
            ops.concat(a, b, 0)
        with pytest.raises(ValueError, match="out of range"):
            ops.concat(a, b, 2)
        with pytest.raises(ValueError, match="out of range"):
            ops.concat(a, b, -3)
        with pytest.raises(ValueError, match="same number of axes"):
            ops.concat(a, c, 1)
        with pytest.raises(TypeError, match="axis must be an int"):
            ops.concat(a, b, 1.0)
        with pytest.raises(TypeError, match="same dtype"):
            ops.concat(b, d, 1)
        with pytest.raises(TypeError):
            ops.concat(a, np.zeros((2, 3)), 1)
        assert ops.concat(a, b, -1).shape == (2, 7)
    finally:
        ctx.close()


def test_function_model_with_residual_and_concat_trains():
    """Two branches of the input, one with a residual connection, concatenated along the features,
    then a linear head: a regression whose target needs both branches."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4)).astype(np.float32)
    y = np.concatenate([np.tanh(x[:, :2]) + x[:, 2:], (x[:, :1] * x[:, 1:2])], axis=1).astype(np.float32)

    def forward(x, p):
        h = ops.relu(ops.linear(x, p["a.weight"], p["a.bias"]))
        h = ops.add(h, ops.relu(ops.linear(h, p["r.weight"], p["r.bias"])))  # residual
        g = ops.tanh(ops.linear(x, p["b.weight"], p["b.bias"]))
        return ops.linear(ops.concat(h, g, -1), p["head.weight"], p["head.bias"])

    shapes = {"a.weight": (16, 4), "a.bias": 16, "r.weight": (16, 16), "r.bias": 16,
              "b.weight": (8, 4), "b.bias": 8, "head.weight": (3, 24), "head.bias": 3}
    model = pgo.FunctionModel(forward, shapes)
    history = model.fit(x, y, epochs=30, batch_size=32, loss="mse", optimizer=pgo.AdamW(lr=1e-2), seed=0, **FAST)
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.2 * losses[0]
    mse = float(((model.predict(x) - y) ** 2).mean())
    assert mse < 0.2 * float(((y - y.mean(axis=0)) ** 2).mean())  # far better than predicting the mean
