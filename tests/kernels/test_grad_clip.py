"""Gradient clipping by the global norm (``global_clipnorm`` of AdamW and SGD; vendor patch 0012).

The model is one Linear layer (3 -> 2) trained full-batch with the MSE loss, whose gradient has a
closed form, so every optimizer step can be replayed in float64 numpy: gradient, global norm, the
scale min(1, c / (norm + 1e-6)) (torch.nn.utils.clip_grad_norm_), then ggml-opt's SGD or AdamW step.

Tolerances: ggml computes in float32. The weights are O(1) and every quantity of a step (gradient,
norm, scale, moments) is a short chain of float32 operations over 8 samples, so each carries a
relative error of a few 1e-7; the steps' updates (weights after minus before) are compared with
rtol 1e-5 (they are >= 0.01 here, so the float32 rounding of the weights themselves, ~6e-8, is
below 1e-5 of them) and the weights with rtol 1e-6. Each test also checks that the unclipped (or
wrongly clipped) reference differs from the clipped one by far more than that, so a step that
ignored the clipping could not pass.
"""
from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L

from support import FAST

N, IN, OUT = 8, 3, 2
RNG = np.random.default_rng(7)
X = RNG.normal(size=(N, IN)).astype(np.float32)
# targets far from the initial outputs: a gradient norm of ~3.7, well above the thresholds used
Y = (RNG.normal(size=(N, OUT)) * 5.0 + 3.0).astype(np.float32)
W0 = {"0.weight": RNG.uniform(-0.5, 0.5, (OUT, IN)).astype(np.float32),
      "0.bias": RNG.uniform(-0.5, 0.5, OUT).astype(np.float32)}


def model():
    m = pgo.Sequential([L.Linear(IN, OUT)])
    m.build((IN,))
    m.set_weights(W0)
    return m


def grads(w, x=X, y=Y):
    """d mean((x W^T + b - y)^2) / d (W, b) in float64: MSE over all n * OUT outputs."""
    r = x.astype(np.float64) @ w["0.weight"].T + w["0.bias"] - y
    k = 2.0 / r.size
    return {"0.weight": k * r.T @ x, "0.bias": k * r.sum(axis=0)}


def clip(g, c):
    """torch.nn.utils.clip_grad_norm_'s scaling, in float64; also returns the norm."""
    if c is None:
        return g, math.nan
    norm = math.sqrt(sum(float((v ** 2).sum()) for v in g.values()))
    s = min(1.0, c / (norm + 1e-6))
    return {k: v * s for k, v in g.items()}, norm


def sgd_reference(c, lr, steps=1, wd=0.0):
    w = {k: v.astype(np.float64) for k, v in W0.items()}
    for _ in range(steps):
        g, _ = clip(grads(w), c)
        w = {k: w[k] * (1 - lr * wd) - lr * g[k] for k in w}
    return w


def adamw_reference(c, lr, b1, b2, eps, wd, steps):
    """ggml-opt's AdamW (decoupled weight decay, bias correction with the step count t)."""
    w = {k: v.astype(np.float64) for k, v in W0.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {k: np.zeros_like(x) for k, x in w.items()}
    for t in range(1, steps + 1):
        g, _ = clip(grads(w), c)
        for k in w:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            mh, vh = m[k] / (1 - b1 ** t), v[k] / (1 - b2 ** t)
            w[k] = w[k] * (1 - lr * wd) - lr * mh / (np.sqrt(vh) + eps)
    return w


def fit(opt, epochs=1, **kw):
    m = model()
    m.fit(X, Y, epochs=epochs, batch_size=N, shuffle=False, loss="mse", optimizer=opt, **FAST, **kw)
    return m.get_weights()


def assert_step(got, ref, wrong):
    """``got`` (after training from W0) matches ``ref``; ``wrong`` (a reference without the right
    clipping) is far from it."""
    for k in ref:
        np.testing.assert_allclose(got[k] - W0[k], ref[k] - W0[k], rtol=1e-5, atol=1e-7, err_msg=k)
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert max(float(np.abs(ref[k] - wrong[k]).max()) for k in ref) > 1e-2


def test_the_gradient_norm_is_above_the_thresholds():
    _, norm = clip(grads({k: v.astype(np.float64) for k, v in W0.items()}), 1.0)
    assert norm > 3.0


def test_sgd_step_is_clipped_like_torch():
    got = fit(pgo.SGD(lr=1.0, global_clipnorm=0.5))
    assert_step(got, sgd_reference(0.5, 1.0), wrong=sgd_reference(None, 1.0))


def test_sgd_with_weight_decay_over_several_steps():
    got = fit(pgo.SGD(lr=0.5, weight_decay=0.1, global_clipnorm=0.25), epochs=3)
    assert_step(got, sgd_reference(0.25, 0.5, steps=3, wd=0.1), wrong=sgd_reference(None, 0.5, steps=3, wd=0.1))


def test_adamw_steps_are_clipped_like_torch():
    # eps comparable to the clipped gradient's entries: AdamW's step then depends on the gradient's
    # scale (with eps -> 0 the first steps are sign(g) whatever the clipping), so the test can tell
    args = dict(lr=0.1, b1=0.9, b2=0.999, eps=0.1, wd=0.01, steps=3)
    got = fit(pgo.AdamW(lr=0.1, eps=0.1, weight_decay=0.01, global_clipnorm=0.05), epochs=3)
    assert_step(got, adamw_reference(0.05, **args), wrong=adamw_reference(None, **args))


@pytest.mark.parametrize("make", [lambda c: pgo.SGD(lr=0.1, global_clipnorm=c),
                                  lambda c: pgo.AdamW(lr=0.01, global_clipnorm=c)], ids=["sgd", "adamw"])
def test_no_clipping_below_the_threshold(make):
    # the divisor is exactly 1 then: the same float32 steps as without clipping, bit for bit
    clipped, plain = fit(make(1e3), epochs=2), fit(make(None), epochs=2)
    assert all(np.array_equal(clipped[k], plain[k]) for k in W0)
    assert not np.array_equal(plain["0.weight"], W0["0.weight"])


def test_accumulated_gradient_is_clipped():
    # physical batches of 4: ggml-opt accumulates two half-batch gradients, then clips their sum
    got = fit(pgo.SGD(lr=1.0, global_clipnorm=0.5), physical_batch_size=4)
    halves = [grads({k: v.astype(np.float64) for k, v in W0.items()}, X[i:i + 4], Y[i:i + 4]) for i in (0, 4)]
    per_half = {k: W0[k] - 0.5 * sum(clip(h, 0.5)[0][k] for h in halves) for k in W0}  # clipping each half
    assert_step(got, sgd_reference(0.5, 1.0), wrong=per_half)


@pytest.mark.parametrize("cls", [pgo.AdamW, pgo.SGD])
@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.nan, math.inf, 1e39, 1e-50])
def test_invalid_thresholds_are_value_errors(cls, bad):
    with pytest.raises(ValueError, match="global_clipnorm"):
        cls(global_clipnorm=bad)


@pytest.mark.parametrize("cls", [pgo.AdamW, pgo.SGD])
@pytest.mark.parametrize("bad", ["1.0", [1.0], True])
def test_non_numbers_are_type_errors(cls, bad):
    with pytest.raises(TypeError, match="global_clipnorm"):
        cls(global_clipnorm=bad)


@pytest.mark.parametrize("opt", [pgo.AdamW(lr=2e-3, eps=1e-7, weight_decay=0.1, global_clipnorm=1.5),
                                 pgo.SGD(lr=0.1, global_clipnorm=2)], ids=["adamw", "sgd"])
def test_config_pickle_and_copies_keep_the_threshold(opt):
    config = opt.get_config()
    assert config["global_clipnorm"] == opt.global_clipnorm > 0
    same = type(opt).from_config(config)
    assert same.get_config() == config
    assert repr(same) == repr(opt) and "global_clipnorm=" in repr(opt)
    for other in (pickle.loads(pickle.dumps(opt)), copy.deepcopy(opt), copy.copy(opt)):
        assert type(other) is type(opt) and other.get_config() == config
    assert type(opt)().global_clipnorm is None  # off by default
