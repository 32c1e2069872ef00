"""BatchNorm1d / BatchNorm2d: PyTorch's batch normalisation, with running statistics kept in the
model as buffers and updated inside fit's training graph (vendor patch 0014).

References are float64 numpy. Tolerances: the normalisation is one float32 multiply-add per value
after per-channel sums in double precision (vendor patch 0025's ops), so values carry relative
errors of a few 1e-7; they are compared with rtol 1e-5 and atol 1e-5 (outputs
are O(1)). Running statistics after k updates are compared with rtol 1e-5 as well: each update is
one float32 multiply-add of O(1) values. Gradients use support.check_op_gradients (central float64
finite differences; rtol 1e-4, atol 1e-5 x max|grad|).
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt.core import Context
from pyggml_opt.data import load_fashion_mnist_small
from pyggml_opt.nn.ops import new_input
from pyggml_opt.nn.ops.norm import batch_norm_train

from support import FAST, check_op_gradients, run_graph

EPS = 1e-5


def reduce_axes(x):
    return (0, *range(2, x.ndim))


def np_bn_train(x, w, b, eps=EPS):
    """Normalised by the batch's per-channel mean and biased variance, then the affine part."""
    axes = reduce_axes(x)
    mu, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    shape = (1, -1, *(1,) * (x.ndim - 2))
    return (x - mu) / np.sqrt(var + eps) * w.reshape(shape) + b.reshape(shape)


def np_bn_eval(x, rm, rv, w, b, eps=EPS):
    shape = (1, -1, *(1,) * (x.ndim - 2))
    return (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps) * w.reshape(shape) + b.reshape(shape)


def channel_arrays(c, seed):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=c).astype(np.float32), rng.uniform(0.5, 2.0, c).astype(np.float32),
            rng.normal(size=c).astype(np.float32), rng.normal(size=c).astype(np.float32))


SHAPES = [(6, 3), (4, 3, 5), (3, 2, 4, 5)]  # (N, C), (N, C, L), (N, C, H, W)


def data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 2.0 + 0.5).astype(np.float32)


# ---- the ops ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_training_forward_matches_numpy(sched, shape):
    x = data(shape)
    rm, rv, w, b = channel_arrays(shape[1], 1)
    out, out_shape, _ = run_graph(sched, lambda *t: batch_norm_train(*t)[0], [x, rm, rv, w, b])
    assert out_shape == shape
    np.testing.assert_allclose(out, np_bn_train(x.astype(np.float64), w, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_inference_forward_uses_the_given_statistics(sched, shape):
    x = data(shape)
    rm, rv, w, b = channel_arrays(shape[1], 2)
    out, out_shape, _ = run_graph(sched, ops.batch_norm, [x, rm, rv, w, b])
    assert out_shape == shape
    np.testing.assert_allclose(out, np_bn_eval(x.astype(np.float64), rm, rv, w, b), rtol=1e-5, atol=1e-5)
    out, _, _ = run_graph(sched, lambda x, rm, rv: ops.batch_norm(x, rm, rv, eps=0.5), [x, rm, rv])
    ones, zeros = np.ones(shape[1]), np.zeros(shape[1])
    np.testing.assert_allclose(out, np_bn_eval(x.astype(np.float64), rm, rv, ones, zeros, 0.5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 4), (2, 2, 3, 3)], ids=str)
def test_training_gradients_match_finite_differences(sched, shape):
    x = data(shape, seed=3)
    rm, rv, w, b = channel_arrays(shape[1], 4)
    # gradients of x, weight and bias (the running statistics get none)
    check_op_gradients(sched, lambda *t: batch_norm_train(*t)[0],
               lambda x, rm, rv, w, b: np_bn_train(x, w, b), [x, rm, rv, w, b], grad_of=(0, 3, 4))


@pytest.mark.parametrize("shape", [(5, 3), (2, 2, 3, 3)], ids=str)
def test_inference_gradients_match_finite_differences(sched, shape):
    # given statistics are constants: the gradient of x is weight / sqrt(running_var + eps) times dy
    x = data(shape, seed=5)
    rm, rv, w, b = channel_arrays(shape[1], 6)
    check_op_gradients(sched, ops.batch_norm, np_bn_eval, [x, rm, rv, w, b], grad_of=(0, 3, 4))


def test_trainable_statistics_are_refused_by_fit():
    # ggml's batch norm has no gradient for given statistics: fit says so instead of aborting in ggml
    def forward(x, p):
        return ops.linear(ops.batch_norm(x, p["mean"], p["var"]), p["w"])

    m = pgo.FunctionModel(forward, {"mean": (4,), "var": (4,), "w": (3, 4)}, input_shape=(4,))
    x, y = data((16, 4)), np.arange(16) % 3
    with pytest.raises(ValueError, match="no gradient for given statistics"):
        m.fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert m.predict(x[:2]).shape == (2, 3)


def test_ops_refuse_bad_shapes():
    ctx = Context(16)
    try:
        x = new_input(ctx, (4, 3, 5), "x")
        good, bad = new_input(ctx, (3,), "s"), new_input(ctx, (5,), "t")
        with pytest.raises(ValueError, match="running_var must have shape"):
            ops.batch_norm(x, good, bad)
        with pytest.raises(ValueError, match="weight must have shape"):
            batch_norm_train(x, good, good, weight=bad)
        with pytest.raises(ValueError, match=r"\(N, C\)"):
            ops.batch_norm(new_input(ctx, (4,), "v"), good, good)
        with pytest.raises(ValueError, match="more than one value per channel"):
            batch_norm_train(new_input(ctx, (1, 3), "one"), good, good)
    finally:
        ctx.close()


# ---- the layers in fit, predict, save ------------------------------------------------------------------
def replay_running_stats(x, c, n_phys, epochs, momentum=0.1):
    """PyTorch's running statistics after one update per physical batch of ``n_phys`` samples, in order."""
    rm, rv = np.zeros(c), np.ones(c)
    for _ in range(epochs):
        for start in range(0, x.shape[0], n_phys):
            xb = x[start:start + n_phys].astype(np.float64)
            axes = reduce_axes(xb)
            rm = (1 - momentum) * rm + momentum * xb.mean(axis=axes)
            rv = (1 - momentum) * rv + momentum * xb.var(axis=axes, ddof=1)
    return rm, rv


@pytest.mark.parametrize("kind", ["1d", "1d_seq", "2d"])
@pytest.mark.parametrize("physical", [12, 6], ids=["one_eval_per_step", "accumulating"])
def test_running_statistics_follow_the_batches(kind, physical):
    # BatchNorm first, so its inputs are the data whatever the training does to the other weights;
    # AdamW with weight decay: the buffers would move if the optimizer touched them
    sample = {"1d": (3,), "1d_seq": (3, 5), "2d": (3, 4, 4)}[kind]
    bn = L.BatchNorm2d(3, momentum=0.2) if kind == "2d" else L.BatchNorm1d(3, momentum=0.2)
    model = pgo.Sequential([bn, L.Flatten(), L.Linear(int(np.prod(sample)), 2)])
    x = data((24, *sample), seed=5)
    y = np.random.default_rng(6).normal(size=(24, 2)).astype(np.float32)
    model.fit(x, y, epochs=2, batch_size=12, physical_batch_size=physical, shuffle=False, loss="mse",
              optimizer=pgo.AdamW(lr=1e-2, weight_decay=0.5), **FAST)
    w = model.get_weights()
    rm, rv = replay_running_stats(x, 3, physical, epochs=2, momentum=0.2)
    np.testing.assert_allclose(w["0.running_mean"], rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w["0.running_var"], rv, rtol=1e-5, atol=1e-6)
    assert not np.allclose(w["0.weight"], 1.0)  # the affine part did train
    assert set(model.optimizer_state.m) == {"0.weight", "0.bias", "2.weight", "2.bias"}  # no optimizer state


def test_predict_and_validation_use_the_running_statistics():
    model = pgo.Sequential([L.BatchNorm2d(2), L.Flatten()])
    model.build((2, 3, 3))
    rm, rv, w, b = channel_arrays(2, 7)
    model.set_weights({"0.running_mean": rm, "0.running_var": rv, "0.weight": w, "0.bias": b})
    x = data((5, 2, 3, 3), seed=8)
    np.testing.assert_allclose(model.predict(x), np_bn_eval(x.astype(np.float64), rm, rv, w, b).reshape(5, -1),
                               rtol=1e-5, atol=1e-5)
    # fit's validation is a forward pass with the running statistics, as evaluate's
    y = np.random.default_rng(9).normal(size=(16, 18)).astype(np.float32)
    xt = data((16, 2, 3, 3), seed=10)
    history = model.fit(xt, y, epochs=1, batch_size=8, loss="mse", validation_data=(x, y[:5]), **FAST)
    loss, _ = model.evaluate(x, y[:5])
    assert history.history["val_loss"][-1] == pytest.approx(loss, rel=1e-5)


def trained_model():
    model = pgo.Sequential([L.Conv1d(2, 3, 3), L.BatchNorm1d(3), L.ReLU(), L.Flatten(), L.Linear(12, 2)])
    x = data((20, 2, 6), seed=11)
    y = np.random.default_rng(12).normal(size=(20, 2)).astype(np.float32)
    model.fit(x, y, epochs=2, batch_size=10, loss="mse", **FAST)
    return model, x


def test_save_load_pickle_and_copies_keep_the_running_statistics(tmp_path):
    model, x = trained_model()
    weights, expected = model.get_weights(), model.predict(x)
    assert not np.allclose(weights["1.running_var"], 1.0)
    model.save(tmp_path / "bn.gguf")
    for other in (pgo.load(tmp_path / "bn.gguf"), pickle.loads(pickle.dumps(model)), copy.deepcopy(model),
                  model.clone()):
        got = other.get_weights()
        assert got.keys() == weights.keys()
        for k in weights:
            np.testing.assert_array_equal(got[k], weights[k], err_msg=k)
        np.testing.assert_array_equal(other.predict(x), expected)
        assert other.buffer_names() == {"1.running_mean", "1.running_var"}


def test_summary_counts_the_buffers_as_non_trainable():
    text = pgo.Sequential([L.BatchNorm1d(4), L.Linear(4, 2)], input_shape=(4,)).summary()
    assert "Trainable params: 18" in text and "Non-trainable params: 8" in text
    assert "0.running_mean (4,)" in text


@pytest.mark.parametrize("layer,shape", [(L.BatchNorm1d(3), (4,)), (L.BatchNorm1d(3), (3, 4, 5)),
                                         (L.BatchNorm2d(3), (3, 4)), (L.BatchNorm2d(3), (2, 4, 4))])
def test_layers_refuse_bad_input_shapes(layer, shape):
    with pytest.raises(ValueError, match="does not fit"):
        pgo.Sequential([layer, L.Flatten()]).build(shape)


def test_bad_arguments_and_batches_of_one():
    for bad in (dict(num_features=0), dict(num_features=3, momentum=1.5), dict(num_features=3, eps=0.0)):
        with pytest.raises(ValueError):
            L.BatchNorm1d(**bad)
    with pytest.raises(TypeError):
        L.BatchNorm2d(3, momentum=None)
    model = pgo.Sequential([L.BatchNorm1d(3), L.Linear(3, 2)])
    x, y = data((4, 3)), np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="more than one value per channel"):
        model.fit(x, y, batch_size=2, physical_batch_size=1, loss="mse", **FAST)


def test_config_round_trip_without_affine():
    layer = L.BatchNorm2d(4, eps=1e-3, momentum=0.05, affine=False, name="bn")
    same = L.BatchNorm2d.from_config(layer.get_config())
    assert same.get_config() == layer.get_config() and same.infer((4, 2, 2)).params == {}
    model = pgo.Sequential([layer, L.Flatten()], input_shape=(4, 2, 2))
    assert set(model.param_shapes) == {"bn.running_mean", "bn.running_var"}


def test_cnn_with_batchnorm_learns_fashion_mnist():
    (x, y), (xt, yt) = load_fashion_mnist_small()
    x, xt = x[:2000].reshape(-1, 1, 28, 28), xt[:500].reshape(-1, 1, 28, 28)
    model = pgo.Sequential([L.Conv2d(1, 8, 3, padding=1), L.BatchNorm2d(8), L.ReLU(), L.MaxPool2d(2),
                            L.Conv2d(8, 8, 3, padding=1), L.BatchNorm2d(8), L.ReLU(), L.MaxPool2d(2),
                            L.Flatten(), L.Linear(8 * 7 * 7, 10)])
    model.fit(x, y[:2000], epochs=2, batch_size=50, optimizer=pgo.AdamW(lr=3e-3), seed=0, **FAST)
    loss, accuracy = model.evaluate(xt, yt[:500])
    assert np.isfinite(loss) and accuracy > 0.7  # 0.1 by chance; 0.76-0.80 measured with seeds 0-2
    w = model.get_weights()
    assert 0.0 < float(w["5.running_var"].min()) and not np.allclose(w["1.running_mean"], 0.0)
