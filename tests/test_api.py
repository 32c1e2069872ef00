"""The public API end to end on small generated data: fit / evaluate / predict, callbacks, History,
GGUF save / load, weights, validation of every argument, interruption and determinism.

Everything runs on the CPU backend with one thread (the test machine's two cores are shared) and
data sets of at most a few hundred samples, so the whole file takes seconds.
"""
from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt.core import (Backend, Buffer, ClosedError, Context, Dataset, Result, Scheduler)
from pyggml_opt.core.gguf import GGUFFile

FAST = dict(verbose=0, n_threads=1)


# ---- data and models ------------------------------------------------------------------------------------
def blobs(n=240, n_features=6, n_classes=3, seed=0, spread=0.6):
    """Gaussian blobs around well-separated centres: learnable to ~100 % by a small MLP."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, n_features)) * 2.0
    y = rng.integers(0, n_classes, n)
    x = centres[y] + spread * rng.normal(size=(n, n_features))
    return x.astype(np.float32), y


def mlp(n_in=6, n_hidden=16, n_out=3, seed=1, build=True):
    m = pgo.Sequential([L.Linear(n_in, n_hidden), L.ReLU(), L.Linear(n_hidden, n_out)])
    if build:
        m.build((n_in,), seed=seed)
    return m


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


@pytest.fixture(scope="module")
def data():
    return blobs()


# ---- training ------------------------------------------------------------------------------------------
def test_sequential_mlp_learns_blobs(data):
    x, y = data
    xt, yt = blobs(n=120, seed=0)[0], blobs(n=120, seed=0)[1]
    model = pgo.Sequential([L.Linear(6, 32), L.ReLU(), L.Linear(32, 3)])
    hist = model.fit(x, y, epochs=15, batch_size=20, optimizer=pgo.AdamW(lr=1e-2), seed=0, **FAST)
    assert isinstance(hist, pgo.History) and model.history is hist
    assert hist.epoch == list(range(15))
    assert hist["loss"][-1] < hist["loss"][0] / 3
    assert hist["accuracy"][-1] >= 0.95
    loss, acc = model.evaluate(xt, yt)
    assert acc >= 0.95, f"accuracy {acc:.3f} on held-out blobs; expected >= 0.95"
    assert loss < 0.3


def test_pgo_fit_is_model_fit(data):
    x, y = data
    a, b = mlp(), mlp()
    ha = a.fit(x, y, epochs=2, batch_size=16, **FAST)
    hb = pgo.fit(b, x, y, epochs=2, batch_size=16, **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    assert ha["loss"] == hb["loss"]
    np.testing.assert_array_equal(pgo.predict(a, x[:5]), b.predict(x[:5]))
    assert pgo.evaluate(a, x, y) == b.evaluate(x, y)


def test_function_model_trains(data):
    """A residual MLP that Sequential cannot express, written over tensor ops."""
    x, y = data

    def forward(x, p):
        h = ops.relu(ops.linear(x, p["w1"], p["b1"]))
        h = ops.add(h, ops.linear(x, p["skip"]))
        return ops.linear(h, p["w2"], p["b2"])

    model = pgo.FunctionModel(forward, {"w1": (16, 6), "b1": (16,), "skip": (16, 6), "w2": (3, 16), "b2": (3,)})
    hist = model.fit(x, y, epochs=10, batch_size=20, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert model.output_shape == (3,)
    assert hist["accuracy"][-1] >= 0.95
    assert model.evaluate(x, y)[1] >= 0.95
    w = model.get_weights()
    assert {k: v.shape for k, v in w.items()} == {"w1": (16, 6), "b1": (16,), "skip": (16, 6), "w2": (3, 16), "b2": (3,)}


def bars(n=200, seed=0):
    """8x8 images with a bright horizontal (class 0) or vertical (class 1) bar: needs the spatial layout."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, 1, 8, 8)).astype(np.float32) * 0.5
    for i in range(n):
        r, c = rng.integers(0, 8, 2)
        if y[i] == 0:
            x[i, 0, r, :] += 2.0
        else:
            x[i, 0, :, c] += 2.0
    return x, y


def test_cnn_on_nchw_images_and_flat_rows():
    """Conv2d takes (n, channels, height, width); flat pixel rows work through Reshape, same weights."""
    x, y = bars()
    cnn = pgo.Sequential([L.Conv2d(1, 4, 3, padding=1), L.ReLU(), L.MaxPool2d(2), L.Flatten(), L.Linear(64, 2)])
    hist = cnn.fit(x, y, epochs=8, batch_size=20, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert cnn.input_shape == (1, 8, 8)
    assert hist["accuracy"][-1] >= 0.95
    xt, yt = bars(n=100, seed=1)
    assert cnn.evaluate(xt, yt)[1] >= 0.9
    flat = pgo.Sequential([L.Reshape((1, 8, 8)), L.Conv2d(1, 4, 3, padding=1), L.ReLU(), L.MaxPool2d(2), L.Flatten(),
                           L.Linear(64, 2)], input_shape=(64,))
    rename = {"0.kernel": "1.kernel", "0.bias": "1.bias", "4.weight": "5.weight", "4.bias": "5.bias"}
    flat.set_weights({rename[k]: v for k, v in cnn.get_weights().items()})
    flat.loss = "cross_entropy"
    np.testing.assert_array_equal(flat.predict(xt.reshape(100, 64)), cnn.predict(xt))
    with pytest.raises(ValueError, match=r"samples of shape \(64,\)"):
        cnn.predict(xt.reshape(100, 64))


def test_class_ids_and_one_hot_train_identically(data):
    x, y = data
    a, b, c = mlp(), mlp(), mlp()
    a.fit(x, y, epochs=2, batch_size=16, **FAST)
    b.fit(x, np.eye(3, dtype=np.float32)[y], epochs=2, batch_size=16, **FAST)
    c.fit(x, y.astype(np.float64), epochs=2, batch_size=16, **FAST)  # integral floats are class ids too
    assert same_weights(a.get_weights(), b.get_weights())
    assert same_weights(a.get_weights(), c.get_weights())
    assert a.history["loss"] == b.history["loss"]


def test_float64_and_int_input_accepted(data):
    x, y = data
    a, b = mlp(), mlp()
    a.fit(x, y, epochs=1, batch_size=16, **FAST)
    b.fit(x.astype(np.float64), y, epochs=1, batch_size=16, **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    xi = np.round(x * 10).astype(np.int32)
    c = mlp()
    c.fit(xi, y, epochs=1, batch_size=16, **FAST)
    np.testing.assert_array_equal(c.predict(xi), c.predict(xi.astype(np.float32)))
    assert c.predict(x.astype(np.float64)).dtype == np.float32


def test_array_like_input(data):
    x, y = data
    model = mlp()
    model.fit(x[:32].tolist(), y[:32].tolist(), epochs=1, batch_size=8, **FAST)
    assert model.predict(x[:3].tolist()).shape == (3, 3)


def test_n_not_multiple_of_batch_size_uses_every_sample():
    """Identity inputs and a linear model with the 'sum' loss: sample i only moves w[i], by lr per use,
    so with SGD ``(w_before - w_after) / lr`` counts how often each sample was used in the epoch."""
    n, lr = 10, 0.5
    model = pgo.FunctionModel(lambda x, p: ops.linear(x, p["w"]), {"w": (1, n)})
    model.build((n,), seed=0)
    for batch, physical in ((4, 4), (4, 2), (3, 1), (7, 7)):
        w0 = model.get_weights()["w"]
        model.fit(np.eye(n, dtype=np.float32), loss="sum", epochs=1, batch_size=batch, physical_batch_size=physical,
                  optimizer=pgo.SGD(lr=lr), seed=3, **FAST)
        counts = (w0 - model.get_weights()["w"])[0] / lr
        np.testing.assert_allclose(counts, np.round(counts), atol=1e-5)
        counts = np.round(counts).astype(int)
        n_steps = math.ceil(n / batch)
        assert (counts >= 1).all(), f"batch {batch}: samples {np.flatnonzero(counts == 0)} never used"
        assert counts.sum() == n_steps * batch  # the last batch is filled up, never dropped
        assert counts.max() <= 2


@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_gradient_accumulation_equals_one_big_batch(opt, data):
    """physical_batch_size < batch_size: ggml-opt accumulates gradients over batch / physical graph
    evaluations; the result equals one evaluation of the whole batch up to float32 rounding
    (as upstream test-opt checks)."""
    x, y = data
    x, y = x[:64], y[:64]
    make = (lambda: pgo.SGD(lr=0.1)) if opt == "sgd" else (lambda: pgo.AdamW(lr=1e-2))
    # one optimizer step
    ref = mlp()
    ref.fit(x[:16], y[:16], epochs=1, batch_size=16, optimizer=make(), shuffle=False, **FAST)
    moved = max_diff(ref.get_weights(), mlp().get_weights())
    assert moved > 1e-4
    for physical in (8, 4, 2, 1):
        m = mlp()
        m.fit(x[:16], y[:16], epochs=1, batch_size=16, physical_batch_size=physical, optimizer=make(),
              shuffle=False, **FAST)
        assert max_diff(m.get_weights(), ref.get_weights()) < 1e-6, physical
    # several steps and epochs, shuffled with the same seed
    ref = mlp()
    ref.fit(x, y, epochs=2, batch_size=16, optimizer=make(), seed=4, **FAST)
    m = mlp()
    m.fit(x, y, epochs=2, batch_size=16, physical_batch_size=4, optimizer=make(), seed=4, **FAST)
    assert max_diff(m.get_weights(), ref.get_weights()) < 1e-5
    np.testing.assert_allclose(m.history["loss"], ref.history["loss"], rtol=1e-5)


def test_validation_split_and_validation_data(data):
    x, y = data
    n = len(x)
    m = mlp()
    hist = m.fit(x, y, epochs=3, batch_size=16, validation_split=0.25, **FAST)
    keys = {"loss", "loss_unc", "accuracy", "accuracy_unc", "val_loss", "val_loss_unc", "val_accuracy",
            "val_accuracy_unc", "time", "lr"}
    assert set(hist.history) == keys
    assert all(len(v) == 3 for v in hist.history.values())
    assert all(np.isfinite(hist[k]).all() for k in keys)
    assert all(0.0 <= a <= 1.0 for a in hist["accuracy"] + hist["val_accuracy"])
    # the held-out samples are the last 25 % (before shuffling), evaluated with the final weights
    n_val = int(n * 0.25)
    vl, va = m.evaluate(x[n - n_val:], y[n - n_val:])
    assert hist["val_loss"][-1] == pytest.approx(vl, rel=1e-5)
    assert hist["val_accuracy"][-1] == pytest.approx(va, abs=1e-12)

    m2 = mlp()
    xv, yv = blobs(n=50, seed=9)
    hist2 = m2.fit(x, y, epochs=2, batch_size=16, validation_data=(xv, yv), **FAST)
    assert all(len(v) == 2 for v in hist2.history.values())
    vl, va = m2.evaluate(xv, yv)
    assert hist2["val_loss"][-1] == pytest.approx(vl, rel=1e-5)
    assert hist2["val_accuracy"][-1] == pytest.approx(va, abs=1e-12)

    hist3 = mlp().fit(x, y, epochs=2, batch_size=16, **FAST)
    assert len(hist3["val_loss"]) == 2 and all(math.isnan(v) for v in hist3["val_loss"])


def test_shuffle_is_seeded(data):
    x, y = data

    def run(seed, shuffle=True):
        m = mlp()  # same initial weights: only the order of the samples differs
        m.fit(x, y, epochs=2, batch_size=16, seed=seed, shuffle=shuffle, **FAST)
        return m.get_weights()

    a, b, c = run(7), run(7), run(8)
    assert same_weights(a, b)
    assert max_diff(a, c) > 1e-4
    assert same_weights(run(7, shuffle=False), run(8, shuffle=False))
    assert max_diff(run(7, shuffle=False), a) > 1e-4


@pytest.mark.parametrize("n,run", [(10, 3), (12, 4), (7, 1), (7, 7), (5, 9), (6, 0)])
def test_epoch_order_shuffles_runs_of_consecutive_samples(n, run):
    from pyggml_opt.train import _epoch_order
    order = _epoch_order(np.random.default_rng(0), n, run)
    assert sorted(order.tolist()) == list(range(n))
    if run == 0:
        assert order.tolist() == list(range(n))
        return
    if run == 1:
        np.testing.assert_array_equal(order, np.random.default_rng(0).permutation(n))  # as before runs existed
    # cut at the starts of runs (multiples of run): every piece is run consecutive samples, the last
    # run of the data set (n % run samples) excepted
    starts = [i for i in range(n) if order[i] % run == 0]
    pieces = [order[a:b].tolist() for a, b in zip(starts, starts[1:] + [n])]
    assert len(pieces) == -(-n // run)
    for p in pieces:
        assert p == list(range(p[0], min(p[0] + run, n)))


@pytest.mark.parametrize("shuffle,run", [(4, 4), ("batch", 16)])
def test_fit_shuffles_runs_of_consecutive_samples(monkeypatch, shuffle, run, data):
    """shuffle=k: every physical batch is made of runs of k consecutive samples (as ggml's ndata_shard),
    in a seeded order that changes every epoch, and each epoch visits every training sample."""
    from pyggml_opt import train
    seen = []
    copy = train._BatchWriter.copy
    monkeypatch.setattr(train._BatchWriter, "copy",
                        lambda self, rows: (seen.append(rows.tolist()) if rows.dtype == np.int32 else None) or copy(self, rows))
    x, y = data
    n = 160  # a multiple of 16: no wrapped-around partial batch
    for _ in range(2):
        mlp().fit(x[:n], y[:n], epochs=2, batch_size=16, physical_batch_size=8, shuffle=shuffle, seed=4, **FAST)
    orders = [sum(seen[i:i + n // 8], []) for i in range(0, len(seen), n // 8)]
    assert len(orders) == 4 and orders[0] == orders[2] and orders[1] == orders[3] and orders[0] != orders[1]
    for order in orders[:2]:
        assert sorted(order) == list(range(n))
        assert all(order[i:i + run] == list(range(order[i], order[i] + run)) for i in range(0, n, run))


def test_seed_initialises_weights(data):
    x, y = data
    a, b, c = mlp(build=False), mlp(build=False), mlp(build=False)
    a.build((6,), seed=3), b.build((6,), seed=3), c.build((6,), seed=4)
    assert same_weights(a.get_weights(), b.get_weights())
    assert max_diff(a.get_weights(), c.get_weights()) > 1e-3


@pytest.mark.parametrize("n_threads,n", [(1, 240), (2, 32)])
def test_determinism_bit_identical(n_threads, n, data):
    """Same seed => bit-identical weights, from initialisation through shuffling, gradient
    accumulation and (second case) two compute threads. The two-thread case is kept tiny: with
    the machine's cores busy, ggml's spinning thread barrier makes every graph evaluation slow."""
    x, y = data
    results = []
    for _ in range(2):
        m = pgo.Sequential([L.Linear(6, 64), L.GELU(), L.LayerNorm(64), L.Linear(64, 3)])
        m.fit(x[:n], y[:n], epochs=3 if n_threads == 1 else 1, batch_size=16, physical_batch_size=8, seed=11,
              verbose=0, n_threads=n_threads)
        results.append((m.get_weights(), m.history["loss"]))
    assert same_weights(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]


def test_in_graph_gather_equals_host_gather(monkeypatch, data):
    """On the CPU, fit's graph gathers each batch from the dataset (GET_ROWS) and the labels of an epoch
    are gathered at once; other backends (and large labels) get each batch gathered on the host. Same
    rows in the same order, so bit-identical training: for an MLP and for a CNN, whose input is
    reshaped to (channels, height, width) after the gather."""
    from pyggml_opt import train
    calls = []
    copy = train._BatchWriter.copy
    monkeypatch.setattr(train._BatchWriter, "copy", lambda self, rows: calls.append((rows.dtype, len(rows))) or copy(self, rows))
    xb, yb = bars(n=60)
    labels_max = train._EPOCH_LABELS_MAX_BYTES
    cases = [(lambda: mlp(), data[0][:100], data[1][:100], 16, 8),
             (lambda: pgo.Sequential([L.Conv2d(1, 4, 3, padding=1), L.ReLU(), L.MaxPool2d(2), L.Flatten(),
                                      L.Linear(64, 2)]), xb, yb, 20, 10)]
    for make, x, y, batch, physical in cases:
        results = []
        for in_graph in (True, False):
            monkeypatch.setattr(train, "_GATHER_IN_GRAPH", in_graph)
            monkeypatch.setattr(train, "_EPOCH_LABELS_MAX_BYTES", labels_max if in_graph else 0)
            calls.clear()
            m = make()
            h = m.fit(x, y, epochs=2, batch_size=batch, physical_batch_size=physical, validation_split=0.2,
                      seed=3, **FAST)
            # per physical batch: the row numbers (int32), then the one-hot labels; none on the host path
            n_phys = 2 * (-(-int(len(x) * 0.8) // batch)) * (batch // physical)
            per_batch = [(np.dtype(np.int32), physical), (np.dtype(np.float32), physical)]
            assert calls == (per_batch * n_phys if in_graph else [])
            results.append((m.get_weights(), h["loss"], h["val_loss"]))
        assert same_weights(results[0][0], results[1][0])
        assert results[0][1:] == results[1][1:]


@pytest.mark.parametrize("opt", [pgo.SGD(lr=0.05), pgo.AdamW(lr=5e-3), "sgd", "adamw"],
                         ids=["SGD", "AdamW", "sgd-name", "adamw-name"])
def test_optimizers_reduce_the_loss(opt, data):
    x, y = data
    m = mlp()
    before = m.evaluate(x, y)[0]
    m.fit(x, y, epochs=4, batch_size=16, optimizer=opt, **FAST)
    assert m.evaluate(x, y)[0] < before


def test_weight_decay_shrinks_weights(data):
    x, y = data
    a, b = mlp(), mlp()
    a.fit(x, y, epochs=2, batch_size=16, optimizer=pgo.SGD(lr=1e-3), **FAST)
    b.fit(x, y, epochs=2, batch_size=16, optimizer=pgo.SGD(lr=1e-3, weight_decay=0.5), **FAST)
    norm = lambda w: sum(float((v ** 2).sum()) for v in w.values())  # noqa: E731
    assert norm(b.get_weights()) < norm(a.get_weights())


def test_lr_schedule_called_once_per_optimizer_step(data):
    x, y = data
    calls = []

    def lr(step):
        calls.append(step)
        return 1e-2 / (1 + step)

    m = mlp()
    # 40 samples, batch 10 => 4 optimizer steps per epoch; physical 5 => 8 graph evaluations per epoch
    hist = m.fit(x[:40], y[:40], epochs=3, batch_size=10, physical_batch_size=5, optimizer=pgo.AdamW(lr=lr), **FAST)
    assert calls == list(range(12))
    assert hist["lr"] == pytest.approx([1e-2 / 4, 1e-2 / 8, 1e-2 / 12])


def test_lr_schedule_changes_training(data):
    x, y = data
    a, b = mlp(), mlp()
    a.fit(x, y, epochs=1, batch_size=16, optimizer=pgo.SGD(lr=0.05), **FAST)
    b.fit(x, y, epochs=1, batch_size=16, optimizer=pgo.SGD(lr=lambda step: 0.05), **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    c = mlp()
    c.fit(x, y, epochs=1, batch_size=16, optimizer=pgo.SGD(lr=lambda step: 0.05 if step < 3 else 0.5), **FAST)
    assert max_diff(a.get_weights(), c.get_weights()) > 1e-3


@pytest.mark.parametrize("schedule,exc,match", [
    (lambda step: 1 / 0, ValueError, "schedule failed at step 0"),
    (lambda step: 1e-3 if step < 3 else 0.0, ValueError, "step 3"),
    (lambda step: 1e-3 if step < 2 else -1.0, ValueError, "step 2"),
    (lambda step: float("nan"), ValueError, "step 0"),
    (lambda step: "fast", TypeError, "step 0"),
    (lambda step: 1e-50, ValueError, "float32"),
])
def test_bad_lr_schedule_raises_python_error(schedule, exc, match, data):
    x, y = data
    m = mlp()
    with pytest.raises(exc, match=match):
        m.fit(x, y, epochs=2, batch_size=16, optimizer=pgo.SGD(lr=schedule), **FAST)
    # the model survives: it predicts and trains again
    assert m.predict(x[:4]).shape == (4, 3)
    m.fit(x, y, epochs=1, batch_size=16, **FAST)


def test_mse_regression_recovers_linear_function():
    rng = np.random.default_rng(0)
    a = np.array([[1.5, -2.0, 0.5], [0.0, 1.0, -1.0]], np.float32)
    b = np.array([0.3, -0.7], np.float32)
    x = rng.normal(size=(200, 3)).astype(np.float32)
    y = x @ a.T + b
    m = pgo.Sequential([L.Linear(3, 2)])
    hist = m.fit(x, y, loss="mse", epochs=60, batch_size=20, optimizer=pgo.AdamW(lr=5e-2), **FAST)
    assert all(math.isnan(v) for v in hist["accuracy"])  # accuracy is undefined for regression
    w = m.get_weights()
    np.testing.assert_allclose(w["0.weight"], a, atol=2e-2)
    np.testing.assert_allclose(w["0.bias"], b, atol=2e-2)
    loss, acc = m.evaluate(x, y)
    assert loss < 1e-3 and math.isnan(acc)
    pred = m.predict(x[:5])  # regression: raw outputs, no softmax
    np.testing.assert_allclose(pred, y[:5], atol=5e-2)


def test_mse_single_output_accepts_1d_targets():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = 2 * x[:, 0] - x[:, 1]
    a, b = pgo.Sequential([L.Linear(2, 1)]), pgo.Sequential([L.Linear(2, 1)])
    a.fit(x, y, loss="mse", epochs=2, batch_size=16, **FAST)
    b.fit(x, y[:, None], loss="mse", epochs=2, batch_size=16, **FAST)
    assert same_weights(a.get_weights(), b.get_weights())


@pytest.mark.parametrize("loss", ["mean", "sum"])
def test_mean_and_sum_losses(loss, data):
    """The model output is the loss: minimising a sigmoid drives it down; y is not needed."""
    x, _ = data
    m = pgo.Sequential([L.Linear(6, 4), L.Sigmoid()])
    hist = m.fit(x, None, loss=loss, epochs=4, batch_size=16, optimizer=pgo.SGD(lr=0.1), **FAST)
    assert np.isfinite(hist["loss"]).all()
    assert hist["loss"][-1] < hist["loss"][0]
    value, acc = m.evaluate(x)
    out = m.predict(x)
    assert out.shape == (len(x), 4) and math.isnan(acc)
    expected = out.mean() if loss == "mean" else out.sum()
    assert value == pytest.approx(float(expected), rel=1e-5)


# ---- callbacks -------------------------------------------------------------------------------------------
class Recorder(pgo.Callback):
    """Records the weights at the end of each epoch and every hook call."""

    def __init__(self, inject=None):
        self.weights, self.events, self.inject = [], [], inject

    def on_train_begin(self, model):
        self.events.append("train_begin")

    def on_epoch_begin(self, model, epoch):
        self.events.append(f"epoch_begin {epoch}")

    def on_batch_end(self, model, batch, logs):
        self.events.append("batch")

    def on_epoch_end(self, model, epoch, logs):
        self.events.append(f"epoch_end {epoch}")
        self.weights.append(model.get_weights())
        if self.inject:
            logs.update({k: v[epoch] for k, v in self.inject.items()})

    def on_train_end(self, model):
        self.events.append("train_end")


def test_callback_hooks_order(data):
    x, y = data
    rec = Recorder()
    mlp().fit(x[:32], y[:32], epochs=2, batch_size=8, callbacks=[rec], **FAST)
    assert rec.events == (["train_begin", "epoch_begin 0"] + ["batch"] * 4 + ["epoch_end 0", "epoch_begin 1"]
                          + ["batch"] * 4 + ["epoch_end 1", "train_end"])


def test_early_stopping_patience_and_restore(data):
    x, y = data
    # scripted monitor values: best at epoch 1, then 3 epochs without improvement > patience 2
    rec = Recorder(inject={"val_loss": [1.0, 0.5, 0.7, 0.6, 0.8, 0.4, 0.3, 0.2]})
    es = pgo.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    m = mlp()
    hist = m.fit(x, y, epochs=8, batch_size=16, callbacks=[rec, es], **FAST)
    assert len(hist.epoch) == 5
    assert es.best_epoch == 1 and es.stopped_epoch == 4 and es.best == 0.5
    assert same_weights(m.get_weights(), rec.weights[1])
    assert not same_weights(m.get_weights(), rec.weights[-1])
    # without restore_best_weights the last epoch's weights stay
    rec = Recorder(inject={"val_loss": [1.0, 0.5, 0.7, 0.6, 0.8, 0.4, 0.3, 0.2]})
    m = mlp()
    m.fit(x, y, epochs=8, batch_size=16, callbacks=[rec, pgo.EarlyStopping(patience=2)], **FAST)
    assert same_weights(m.get_weights(), rec.weights[-1]) and len(rec.weights) == 5


def test_early_stopping_real_metric_restores_best_epoch(data):
    x, y = data
    rec = Recorder()
    es = pgo.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True)
    m = mlp()
    # a learning rate high enough that the validation loss stops improving quickly
    hist = m.fit(x, y, epochs=12, batch_size=8, validation_split=0.3, optimizer=pgo.SGD(lr=1.0),
                 callbacks=[rec, es], **FAST)
    best = int(np.argmin(hist["val_loss"]))
    assert es.best_epoch == best
    assert same_weights(m.get_weights(), rec.weights[best])
    if len(hist.epoch) < 12:
        assert len(hist.epoch) - 1 - best == 2  # stopped after patience + 1 epochs without improvement


def test_early_stopping_min_delta_and_accuracy_mode(data):
    x, y = data
    rec = Recorder(inject={"val_accuracy": [0.5, 0.6, 0.605, 0.9, 0.9]})
    es = pgo.EarlyStopping(monitor="val_accuracy", patience=0, min_delta=0.01)  # mode auto -> max
    hist = mlp().fit(x, y, epochs=5, batch_size=16, callbacks=[rec, es], **FAST)
    assert len(hist.epoch) == 3 and es.best_epoch == 1


def test_early_stopping_unknown_monitor_raises(data):
    x, y = data
    with pytest.raises(ValueError, match="val_loss"):
        mlp().fit(x, y, epochs=2, batch_size=16, callbacks=[pgo.EarlyStopping(monitor="val_loss")], **FAST)
    with pytest.raises(ValueError, match="mode"):
        pgo.EarlyStopping(mode="sideways")
    with pytest.raises(ValueError, match="patience"):
        pgo.EarlyStopping(patience=-1)


# ModelCheckpoint stores the optimizer state by default, through accessors that vendor/patches/0002
# adds to ggml-opt; an extension built before that patch lacks them (rebuild: pip install -e .).
HAS_OPT_STATE = hasattr(pgo.lib, "ggml_opt_get_iter")
SAVE_OPTIMIZER = [False, pytest.param(True, marks=pytest.mark.skipif(
    not HAS_OPT_STATE, reason="the compiled extension predates vendor/patches/0002; reinstall the package"))]


@pytest.mark.parametrize("save_optimizer", SAVE_OPTIMIZER)
def test_model_checkpoint_every_epoch(tmp_path, data, save_optimizer):
    x, y = data
    rec = Recorder()
    ck = pgo.ModelCheckpoint(tmp_path / "ck-{epoch}.gguf", save_optimizer=save_optimizer)
    m = mlp()
    m.fit(x, y, epochs=3, batch_size=16, callbacks=[rec, ck], **FAST)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["ck-1.gguf", "ck-2.gguf", "ck-3.gguf"]
    assert ck.saved == [str(tmp_path / f"ck-{i}.gguf") for i in (1, 2, 3)]
    for i in range(3):
        loaded = pgo.load(tmp_path / f"ck-{i + 1}.gguf")
        assert same_weights(loaded.get_weights(), rec.weights[i])
    np.testing.assert_array_equal(pgo.load(tmp_path / "ck-3.gguf").predict(x[:7]), m.predict(x[:7]))


@pytest.mark.parametrize("save_optimizer", SAVE_OPTIMIZER)
def test_model_checkpoint_save_best_only(tmp_path, data, save_optimizer):
    x, y = data
    rec = Recorder(inject={"val_loss": [3.0, 1.0, 2.0, 0.5, 0.7]})
    ck = pgo.ModelCheckpoint(str(tmp_path / "best-{epoch}.gguf"), save_best_only=True, save_optimizer=save_optimizer)
    mlp().fit(x, y, epochs=5, batch_size=16, callbacks=[rec, ck], **FAST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-1.gguf", "best-2.gguf", "best-4.gguf"]
    assert same_weights(pgo.load(tmp_path / "best-4.gguf").get_weights(), rec.weights[3])
    # a fixed path keeps only the best
    rec = Recorder(inject={"val_loss": [3.0, 1.0, 2.0, 0.5, 0.7]})
    ck = pgo.ModelCheckpoint(tmp_path / "best.gguf", save_best_only=True, save_optimizer=save_optimizer)
    mlp().fit(x, y, epochs=5, batch_size=16, callbacks=[rec, ck], **FAST)
    assert same_weights(pgo.load(tmp_path / "best.gguf").get_weights(), rec.weights[3])
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    with pytest.raises(ValueError, match="val_loss"):
        mlp().fit(x, y, epochs=1, batch_size=16, callbacks=[pgo.ModelCheckpoint(tmp_path / "x.gguf",
                                                                                  save_best_only=True)], **FAST)


def test_lambda_callback_stop_training_within_one_batch(data):
    x, y = data
    seen, epochs_ended = [], []

    def on_batch_end(model, batch, logs):
        seen.append(batch)
        assert set(logs) >= {"loss", "accuracy"}
        if len(seen) == 3:
            model.stop_training = True

    m = mlp()
    w0 = m.get_weights()
    hist = m.fit(x, y, epochs=5, batch_size=16, callbacks=[
        pgo.LambdaCallback(on_batch_end=on_batch_end, on_epoch_end=lambda mo, e, l: epochs_ended.append(e))], **FAST)
    assert seen == [0, 1, 2]
    assert hist.epoch == [0] and epochs_ended == [0]
    assert max_diff(m.get_weights(), w0) > 0
    # the same three steps without the callback give the same weights: nothing ran after the stop
    ref = mlp()
    ref.fit(x[:48], y[:48], epochs=1, batch_size=16, shuffle=False, **FAST)
    m2 = mlp()
    stop3 = pgo.LambdaCallback(on_batch_end=lambda mo, b, l: setattr(mo, "stop_training", b == 2))
    m2.fit(x, y, epochs=1, batch_size=16, shuffle=False, callbacks=[stop3], **FAST)
    assert same_weights(ref.get_weights(), m2.get_weights())


def test_predict_and_evaluate_from_a_callback(data):
    """Callbacks run in fit's thread: evaluating the model there works (the model lock is re-entrant)
    and sees the weights of the epoch just finished."""
    x, y = data
    xt, yt = blobs(n=50, seed=8)
    seen = []
    cb = pgo.LambdaCallback(on_epoch_end=lambda mo, e, logs: seen.append((mo.evaluate(xt, yt), mo.predict(xt[:3]),
                                                                          mo.get_weights())))
    m = mlp()
    m.fit(x, y, epochs=3, batch_size=16, validation_split=0.2, callbacks=[cb], **FAST)
    assert len(seen) == 3
    assert seen[-1][0] == m.evaluate(xt, yt)
    np.testing.assert_array_equal(seen[-1][1], m.predict(xt[:3]))
    assert same_weights(seen[-1][2], m.get_weights())
    assert seen[0][0] != seen[-1][0]


@pytest.mark.parametrize("action,exc,match", [
    (lambda m: m.close(), RuntimeError, "cannot close the model while fit is running"),
    (lambda m: m.fit(X, Y, **FAST), RuntimeError, "cannot fit the model while fit is running"),
    (lambda m: m.build((6,)), RuntimeError, "cannot build the model while fit is running"),
    (lambda m: m.predict(X, backend="CPU"), ValueError, "fit's backend 'cpu'"),
])
def test_callbacks_cannot_pull_the_model_from_under_fit(action, exc, match):
    """What would free or replace the parameters fit is using is refused from a callback."""
    def on_batch_end(model, batch, logs):
        action(model)

    m = mlp()
    with pytest.raises(exc, match=match):
        m.fit(X, Y, epochs=1, batch_size=8, callbacks=[pgo.LambdaCallback(on_batch_end=on_batch_end)], **FAST)
    assert m.predict(X[:2]).shape == (2, 3)
    m.fit(X, Y, epochs=1, batch_size=8, **FAST)


def test_keyboard_interrupt_from_callback(data):
    x, y = data
    count = {"batches": 0, "epochs": 0}

    def on_batch_end(model, batch, logs):
        count["batches"] += 1
        if count["batches"] == 2 * 15 + 4:  # 15 batches per epoch: during the third epoch
            raise KeyboardInterrupt

    m = mlp()
    cb = pgo.LambdaCallback(on_batch_end=on_batch_end,
                            on_epoch_end=lambda mo, e, l: count.__setitem__("epochs", count["epochs"] + 1))
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, epochs=10, batch_size=16, callbacks=[cb], **FAST)
    assert count["batches"] == 34
    assert m.history.epoch == [0, 1] and count["epochs"] == 2
    assert m.predict(x[:3]).shape == (3, 3)
    m.fit(x, y, epochs=1, batch_size=16, **FAST)  # and trains again


SIGINT_CHILD = textwrap.dedent("""
    import json, signal, sys, time
    import numpy as np
    import pyggml_opt as pgo
    from pyggml_opt import layers as L

    state = {"batches": 0, "at_signal": None, "t_signal": None, "epochs": 0}

    def on_sigint(signum, frame):
        state["at_signal"], state["t_signal"] = state["batches"], time.perf_counter()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)

    def on_batch_end(model, batch, logs):
        state["batches"] += 1

    def on_epoch_end(model, epoch, logs):
        state["epochs"] += 1
        print("EPOCH", epoch, flush=True)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 64)).astype(np.float32)
    y = rng.integers(0, 10, 1024)
    model = pgo.Sequential([L.Linear(64, 256), L.ReLU(), L.Linear(256, 10)])
    try:
        model.fit(x, y, epochs=10**6, batch_size=128, verbose=0, n_threads=1,
                  callbacks=[pgo.LambdaCallback(on_batch_end=on_batch_end, on_epoch_end=on_epoch_end)])
        print("RESULT", json.dumps({"error": "fit returned"}))
    except KeyboardInterrupt:
        out = dict(state, t_stop=time.perf_counter(), history=len(model.history.epoch),
                   predict_shape=list(model.predict(x[:5]).shape),
                   finite=bool(np.isfinite(model.predict(x[:5])).all()))
        print("RESULT", json.dumps(out), flush=True)
""")


def test_sigint_during_fit_stops_within_one_batch():
    proc = subprocess.Popen([sys.executable, "-c", SIGINT_CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        for line in proc.stdout:
            if line.startswith("EPOCH 1"):
                break
        else:
            pytest.fail(f"child ended early: {proc.stderr.read()}")
        time.sleep(0.05)  # land somewhere inside an epoch
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"child died with {proc.returncode}: {err}"
    result = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT"))[len("RESULT "):])
    assert "error" not in result, result
    assert result["at_signal"] is not None
    assert result["batches"] - result["at_signal"] <= 1, result   # stopped within one batch
    assert result["t_stop"] - result["t_signal"] < 5.0, result
    # History holds the completed epochs (the signal may interrupt on_epoch_end of a completed epoch)
    assert result["epochs"] >= 2 and result["epochs"] <= result["history"] <= result["epochs"] + 1, result
    assert result["predict_shape"] == [5, 10] and result["finite"], result


SIGINT_STORM_CHILD = textwrap.dedent("""
    import signal, sys, time
    import numpy as np
    import pyggml_opt as pgo
    from pyggml_opt import layers as L

    def on_sigint(signum, frame):
        # Ctrl+C's KeyboardInterrupt wherever it lands inside the library (also in the C callbacks);
        # not in this driver loop, which would only kill the child without telling anything
        if "pyggml_opt" in frame.f_code.co_filename:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = rng.integers(0, 2, 64)
    model = pgo.Sequential([L.Linear(4, 4), L.Linear(4, 2)])
    interrupted = 0
    print("READY", flush=True)
    end = time.perf_counter() + float(sys.argv[1])
    while time.perf_counter() < end:
        try:  # batch 1: the optimizer-params callback runs at every step, so signals often land in it
            model.fit(x, y, epochs=5, batch_size=1, verbose=0, n_threads=1,
                      optimizer=pgo.AdamW(lr=lambda step: 1e-3))
        except KeyboardInterrupt:
            interrupted += 1
    print("DONE", interrupted, model.predict(x[:2]).shape, flush=True)
""")


def test_sigint_storm_never_aborts():
    """Ctrl+C at random moments, hundreds of times: a KeyboardInterrupt raised inside ggml-opt's
    optimizer-params callback must not reach ggml as a zeroed struct (ggml-opt aborts on lr == 0)."""
    duration = 3.0
    proc = subprocess.Popen([sys.executable, "-c", SIGINT_STORM_CHILD, str(duration + 2)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("READY")
        rnd = np.random.default_rng(0)
        t0, sent = time.perf_counter(), 0
        while time.perf_counter() - t0 < duration and proc.poll() is None:
            time.sleep(rnd.uniform(0.002, 0.02))
            proc.send_signal(signal.SIGINT)
            sent += 1
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"child died with {proc.returncode} after {sent} SIGINTs: {err[-3000:]}"
    assert "ggml aborted" not in err
    done = [l for l in out.splitlines() if l.startswith("DONE")]
    assert done and int(done[0].split()[1]) >= 1, (sent, out)
    assert done[0].endswith("(2, 2)")


# ---- predict / evaluate ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(data):
    x, y = data
    m = mlp()
    m.fit(x, y, epochs=5, batch_size=16, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    return m


@pytest.mark.parametrize("n", [1, 257, 1000])
def test_predict_any_n(n, trained):
    x = blobs(n=n, seed=5)[0]
    p = trained.predict(x)  # default batch_size 256: 257 is one full batch plus one sample
    assert p.shape == (n, 3) and p.dtype == np.float32
    assert np.isfinite(p).all() and (p >= 0).all()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
    # batch boundaries do not matter: each row equals its prediction alone
    for i in {0, n // 2, n - 1}:
        np.testing.assert_allclose(trained.predict(x[i:i + 1])[0], p[i], rtol=1e-5, atol=1e-7)
    p7 = trained.predict(x, batch_size=7)
    np.testing.assert_allclose(p7, p, rtol=1e-5, atol=1e-7)


def test_predict_logits(trained, data):
    x, _ = data
    z = trained.predict(x[:10], logits=True)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), trained.predict(x[:10]), rtol=1e-5, atol=1e-7)
    assert not np.allclose(z.sum(axis=1), 1.0)


def test_evaluate_consistent_with_predict(trained):
    x, y = blobs(n=300, seed=6)
    loss, acc = trained.evaluate(x, y)
    p = trained.predict(x).astype(np.float64)
    assert acc == pytest.approx(float((p.argmax(axis=1) == y).mean()), abs=1e-12)
    assert loss == pytest.approx(float(-np.log(p[np.arange(len(y)), y]).mean()), rel=1e-4)
    # one-hot targets give the same; uncertainties on request
    assert trained.evaluate(x, np.eye(3)[y]) == pytest.approx((loss, acc))
    l2, lu, a2, au = trained.evaluate(x, y, return_uncertainty=True)
    assert (l2, a2) == pytest.approx((loss, acc)) and lu > 0 and au > 0
    assert au == pytest.approx(math.sqrt(acc * (1 - acc) / (len(y) - 1)))


def test_training_metrics_match_evaluate_without_updates(data):
    """With lr so small the weights barely move, the epoch's train loss equals evaluate's."""
    x, y = data
    m = mlp()
    l0, a0 = m.evaluate(x[:64], y[:64])
    hist = m.fit(x[:64], y[:64], epochs=1, batch_size=16, optimizer=pgo.SGD(lr=1e-12), **FAST)
    assert hist["loss"][0] == pytest.approx(l0, rel=1e-4)
    assert hist["accuracy"][0] == pytest.approx(a0, abs=1e-9)


# ---- save / load -----------------------------------------------------------------------------------------
def assert_roundtrip(model, x, path):
    model.save(path)
    loaded = pgo.load(path)
    assert type(loaded) is type(model)
    assert loaded.input_shape == model.input_shape and loaded.output_shape == model.output_shape
    assert same_weights(loaded.get_weights(), model.get_weights())
    assert loaded.loss == model.loss
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    return loaded


def test_save_load_sequential_with_every_layer(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 64)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    model = pgo.Sequential([
        L.Reshape((1, 8, 8)), L.Conv2d(1, 4, 3, padding=1, name="c1"), L.GELU(), L.MaxPool2d(2),
        L.Conv2d(4, 4, (3, 2), stride=(1, 1), dilation=1), L.Tanh(), L.AvgPool2d(2, stride=1), L.Flatten(),
        L.LayerNorm(8), L.Linear(8, 6), L.Sigmoid(), L.SiLU(), L.Linear(6, 5, bias=False), L.ReLU(),
        L.Linear(5, 3, name="head"),
    ])
    model.fit(x, y, epochs=2, batch_size=8, **FAST)
    loaded = assert_roundtrip(model, x, tmp_path / "seq.gguf")
    assert repr(loaded) == repr(model)
    assert loaded.config() == model.config()
    assert "c1.kernel" in loaded.get_weights() and "head.bias" in loaded.get_weights()
    with GGUFFile.read(tmp_path / "seq.gguf") as f:
        assert f.get("general.architecture") == "pyggml_opt"
        assert json.loads(f.get("pyggml_opt.config")) == model.config()
    # the loaded model keeps training
    loaded.fit(x, y, epochs=1, batch_size=8, **FAST)


def test_save_load_regression_and_untrained(tmp_path):
    m = pgo.Sequential([L.Linear(3, 2)], input_shape=(3,))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    loaded = assert_roundtrip(m, x, tmp_path / "untrained.gguf")
    assert loaded.loss is None
    m.fit(x, x[:, :2], loss="mse", epochs=1, batch_size=5, **FAST)
    loaded = assert_roundtrip(m, x, tmp_path / "mse.gguf")
    assert loaded.loss == "mse"


def test_save_load_mnist_fc(tmp_path):
    m = pgo.models.mnist_fc()
    m.loss = "cross_entropy"
    x = np.random.default_rng(0).uniform(size=(6, 784)).astype(np.float32)
    assert_roundtrip(m, x, tmp_path / "fc.gguf")
    with GGUFFile.read(tmp_path / "fc.gguf") as f:
        assert f.get("general.architecture") == "mnist-fc"
        assert sorted(f.tensor_names()) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
        assert f.tensor_shape("fc1.weight") == (500, 784)


def test_save_load_mnist_cnn_dense_permutation(tmp_path):
    m = pgo.models.mnist_cnn()
    x = np.random.default_rng(0).uniform(size=(3, 784)).astype(np.float32)
    y = np.array([1, 2, 3])
    m.fit(x, y, epochs=1, batch_size=3, **FAST)
    loaded = assert_roundtrip(m, x, tmp_path / "cnn.gguf")
    assert loaded.layers[1].name == "conv1"
    w = m.get_weights()["dense.weight"]  # columns in pyggml_opt's Flatten order (channel, h, w)
    with GGUFFile.read(tmp_path / "cnn.gguf") as f:
        assert f.get("general.architecture") == "mnist-cnn"
        assert sorted(f.tensor_names()) == ["conv1.bias", "conv1.kernel", "conv2.bias", "conv2.kernel",
                                            "dense.bias", "dense.weight"]
        stored = f.tensor("dense.weight", 2)  # columns in ggml's order (h, w, channel)
    assert stored.shape == w.shape == (10, 7 * 7 * 16)
    assert not np.array_equal(stored, w)
    for c, i, j in [(0, 0, 1), (5, 3, 2), (15, 6, 6), (7, 0, 0)]:
        np.testing.assert_array_equal(stored[:, (i * 7 + j) * 16 + c], w[:, c * 49 + i * 7 + j])
    np.testing.assert_array_equal(pgo.io.load_weights(tmp_path / "cnn.gguf", m)["dense.weight"], w)


def test_function_model_weights_roundtrip(tmp_path, data):
    x, y = data
    f = lambda x, p: ops.linear(ops.tanh(ops.linear(x, p["a"])), p["b"])  # noqa: E731
    m = pgo.FunctionModel(f, {"a": (8, 6), "b": (3, 8)})
    m.fit(x, y, epochs=1, batch_size=16, **FAST)
    m.save(tmp_path / "fm.gguf")
    with pytest.raises(ValueError, match="FunctionModel"):
        pgo.load(tmp_path / "fm.gguf")
    m2 = pgo.FunctionModel(f, {"a": (8, 6), "b": (3, 8)}, input_shape=(6,))
    m2.set_weights(pgo.io.load_weights(tmp_path / "fm.gguf", m2))
    m2.loss = m.loss
    np.testing.assert_array_equal(m2.predict(x), m.predict(x))


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        pgo.load(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError):
        pgo.load(tmp_path / "junk.gguf")
    with GGUFFile() as f:
        f.set("general.architecture", "llama")
        f.write(tmp_path / "llama.gguf")
    with pytest.raises(ValueError, match="architecture"):
        pgo.load(tmp_path / "llama.gguf")
    with pytest.raises(TypeError, match="model"):
        pgo.io.save("not a model", tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).save(tmp_path / "x.gguf")


# ---- weights ---------------------------------------------------------------------------------------------
def test_get_set_weights_roundtrip(data):
    x, y = data
    a = mlp()
    a.fit(x, y, epochs=1, batch_size=16, **FAST)
    w = a.get_weights()
    assert set(w) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert w["0.weight"].shape == (16, 6) and w["0.weight"].dtype == np.float32
    w["0.weight"][:] = 0  # a copy: the model is unchanged
    assert not np.array_equal(a.get_weights()["0.weight"], w["0.weight"])
    b = mlp(seed=99)
    b.set_weights(a.get_weights())
    assert same_weights(a.get_weights(), b.get_weights())
    b.loss = a.loss
    np.testing.assert_array_equal(b.predict(x[:9]), a.predict(x[:9]))
    # partial update, float64 converted
    b.set_weights({"2.bias": np.array([1.0, 2.0, 3.0])})
    np.testing.assert_array_equal(b.get_weights()["2.bias"], np.array([1, 2, 3], np.float32))
    assert np.array_equal(b.get_weights()["0.weight"], a.get_weights()["0.weight"])
    # before the first run the weights live in numpy; same behaviour
    c = mlp()
    c.set_weights(a.get_weights())
    assert same_weights(c.get_weights(), a.get_weights())
    assert a.count_params() == 16 * 6 + 16 + 3 * 16 + 3
    assert "0.weight" in a.summary()


def test_set_weights_errors():
    m = mlp()
    with pytest.raises(ValueError, match="unknown parameter 'nope'"):
        m.set_weights({"nope": np.zeros(3)})
    with pytest.raises(ValueError, match=r"'0.bias'.*shape"):
        m.set_weights({"0.bias": np.zeros(15)})
    with pytest.raises(ValueError, match="NaN"):
        m.set_weights({"0.bias": np.full(16, np.nan)})
    with pytest.raises(TypeError, match="dict"):
        m.set_weights([np.zeros(16)])
    with pytest.raises(TypeError, match="'0.bias'"):
        m.set_weights({"0.bias": np.array(["a"] * 16)})
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).get_weights()
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).set_weights({})
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).predict(np.zeros((2, 6)))


# ---- validation of arguments -----------------------------------------------------------------------------
X, Y = blobs(n=32)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(x=X[:, :5]), ValueError, r"x has samples of shape \(5,\)"),
    (dict(y=Y[:20]), ValueError, "x and y have different lengths"),
    (dict(x=X[:0], y=Y[:0]), ValueError, "x is empty"),
    (dict(x=X[0]), ValueError, "x must have a batch axis"),
    (dict(x=np.where(np.arange(32)[:, None] == 3, np.nan, X)), ValueError, "x contains NaN or inf"),
    (dict(x=np.where(np.arange(32)[:, None] == 3, np.inf, X)), ValueError, "x contains NaN or inf"),
    (dict(x=np.array([["a"] * 6] * 32)), TypeError, "x must hold numbers"),
    (dict(x=np.where(np.arange(32)[:, None] == 3, 1e39, X.astype(np.float64))), ValueError, "beyond float32"),
    (dict(y=np.where(np.arange(32)[:, None] == 0, np.nan, np.eye(3)[Y])), ValueError, "y contains NaN or inf"),
    (dict(y=np.where(np.arange(32) == 0, np.inf, Y)), ValueError, "y: class ids must be integers"),
    (dict(y=Y + 0.5), ValueError, "y: class ids must be integers"),
    (dict(y=Y + 1), ValueError, r"y: class ids must be in \[0, 3\)"),
    (dict(y=Y - 1), ValueError, r"y: class ids must be in \[0, 3\)"),
    (dict(y=np.ones((32, 4))), ValueError, r"y must have shape \(32, 3\)"),
    (dict(y=np.ones((32, 3))), ValueError, "one-hot or probability rows"),
    (dict(y=None), ValueError, "y is required"),
    (dict(y=np.full((32, 3), np.nan), loss="mse"), ValueError, "y contains NaN or inf"),
    (dict(loss="hinge"), ValueError, "unknown loss 'hinge'"),
    (dict(loss=None), ValueError, "unknown loss"),
    (dict(backend="tpu"), ValueError, "backend 'tpu'"),
    (dict(backend=3), TypeError, "backend"),
    (dict(optimizer="rmsprop"), ValueError, "unknown optimizer 'rmsprop'"),
    (dict(optimizer=3), TypeError, "optimizer"),
    (dict(shuffle="yes"), ValueError, "shuffle must be True, False, 'batch' or a positive int, got 'yes'"),
    (dict(shuffle=0), ValueError, "shuffle must be .* positive int, got 0"),
    (dict(shuffle=-3), ValueError, "shuffle must be .* positive int, got -3"),
    (dict(shuffle=2.5), TypeError, "shuffle must be a bool, 'batch' or a positive int, got float"),
    (dict(shuffle=None), TypeError, "shuffle must be .* got NoneType"),
    (dict(batch_size=0), ValueError, "batch_size must be an int >= 1"),
    (dict(batch_size=-4), ValueError, "batch_size must be an int >= 1"),
    (dict(batch_size=2.5), ValueError, "batch_size must be an int >= 1"),
    (dict(batch_size=True), ValueError, "batch_size must be an int >= 1"),
    (dict(batch_size=8, physical_batch_size=3), ValueError, r"batch_size \(8\) must be a multiple of physical_batch_size \(3\)"),
    (dict(batch_size=8, physical_batch_size=16), ValueError, "must be a multiple of physical_batch_size"),
    (dict(physical_batch_size=0), ValueError, "physical_batch_size must be an int >= 1"),
    (dict(validation_split=1.0), ValueError, r"validation_split must be in \[0, 1\)"),
    (dict(validation_split=-0.1), ValueError, r"validation_split must be in \[0, 1\)"),
    (dict(validation_split="0.1"), ValueError, "validation_split"),
    (dict(validation_split=0.2, validation_data=(X, Y)), ValueError, "validation_split or validation_data"),
    (dict(validation_data=(X[:, :5], Y)), ValueError, r"validation_data\[0\] has samples of shape"),
    (dict(validation_data=(X, Y[:3])), ValueError, "different lengths"),
    (dict(validation_data=(X,)), ValueError, "validation_data must be a pair"),
    (dict(epochs=-1), ValueError, "epochs must be an int >= 0"),
    (dict(verbose=3), ValueError, "verbose must be 0, 1 or 2"),
    (dict(seed=-1), ValueError, "seed must be a non-negative int"),
    (dict(n_threads=0), ValueError, "n_threads must be a positive int"),
    (dict(callbacks=[lambda *a: None]), TypeError, "callbacks must be Callback objects"),
])
def test_fit_argument_validation(kwargs, exc, match):
    args = dict(x=X, y=Y, epochs=1, batch_size=8, verbose=0, n_threads=1)
    args.update(kwargs)
    m = mlp()
    w0 = m.get_weights()
    with pytest.raises(exc, match=match):
        m.fit(args.pop("x"), args.pop("y"), **args)
    assert same_weights(m.get_weights(), w0)  # nothing trained
    m.fit(X, Y, epochs=1, batch_size=8, **FAST)  # and the model is still usable


def test_fit_rejects_non_model():
    with pytest.raises(TypeError, match="model"):
        pgo.fit("model", X, Y)


@pytest.mark.parametrize("make,match", [
    (lambda: pgo.AdamW(lr=0), "lr"), (lambda: pgo.AdamW(lr=-1e-3), "lr"), (lambda: pgo.SGD(lr=0.0), "lr"),
    (lambda: pgo.SGD(lr=float("inf")), "lr"), (lambda: pgo.SGD(lr=float("nan")), "lr"),
    (lambda: pgo.AdamW(beta1=1.5), "beta1"), (lambda: pgo.AdamW(beta1=-0.1), "beta1"),
    (lambda: pgo.AdamW(beta2=1.01), "beta2"), (lambda: pgo.AdamW(beta2=-1), "beta2"),
    # ggml-opt accepts 1, then divides by 1 - 1**t in the bias correction: NaN weights
    (lambda: pgo.AdamW(beta1=1.0), r"beta1 must be in \[0.0, 1.0\), got 1.0 \(with 1, AdamW's bias correction"),
    (lambda: pgo.AdamW(beta2=1), r"beta2 must be in \[0.0, 1.0\), got 1"),
    (lambda: pgo.AdamW(weight_decay=1.5), "weight_decay"), (lambda: pgo.AdamW(weight_decay=-0.1), "weight_decay"),
    (lambda: pgo.SGD(weight_decay=2), "weight_decay"), (lambda: pgo.AdamW(eps=-1e-8), "eps"),
    # ggml-opt receives float32: 1e-50 would arrive as 0.0 (ggml asserts alpha > 0), 1e39 as inf
    (lambda: pgo.SGD(lr=1e-50), "float32"), (lambda: pgo.AdamW(lr=1e39), "float32"),
])
def test_optimizer_ranges(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_optimizer_types():
    with pytest.raises(TypeError, match="lr"):
        pgo.SGD(lr="0.1")
    with pytest.raises(TypeError, match="beta1"):
        pgo.AdamW(beta1=None)
    # the edges of the ranges are accepted
    pgo.AdamW(lr=1e-9, beta1=0.0, beta2=0.999999, weight_decay=1.0)
    pgo.SGD(lr=10.0, weight_decay=0.0)


@pytest.mark.parametrize("layers,input_shape,match", [
    ([L.Linear(6, 8), L.Linear(7, 3, name="fc2")], (6,), r"Linear\(in_features=7.*'fc2'.*\(8,\)"),
    ([L.Conv2d(3, 4, 3)], (1, 8, 8), r"Conv2d\(in_channels=3"),
    ([L.Reshape((1, 8, 8)), L.Conv2d(1, 4, 9), L.Flatten()], (64,), r"Conv2d.*kernel"),
    ([L.Reshape((2, 4, 4)), L.MaxPool2d(5), L.Flatten()], (32,), r"MaxPool2d.*window"),
    ([L.AvgPool2d(2)], (16,), r"AvgPool2d.*\(channels, height, width\)"),
    ([L.Reshape((3, 5))], (16,), r"Reshape.*15 values"),
    ([L.Linear(6, 8), L.LayerNorm(7)], (6,), r"LayerNorm.*last axis of size 7"),
    ([L.Linear(4, 3)], (2, 2), r"Linear.*Flatten"),
    ([L.Reshape((1, 4, 4)), L.Conv2d(1, 2, 3)], (16,), "output must be"),
])
def test_layer_shape_mismatch_at_build(layers, input_shape, match):
    m = pgo.Sequential(layers)
    with pytest.raises(ValueError, match=match):
        m.build(input_shape)
    assert not m.built


def test_model_construction_errors():
    with pytest.raises(ValueError, match="non-empty"):
        pgo.Sequential([])
    with pytest.raises(TypeError, match="layer 1"):
        pgo.Sequential([L.Linear(2, 2), "relu"])
    with pytest.raises(ValueError, match="unique"):
        pgo.Sequential([L.Linear(2, 2, name="a"), L.Linear(2, 2, name="a")])
    with pytest.raises(ValueError, match="out_features"):
        L.Linear(2, 0)
    with pytest.raises(ValueError, match="kernel_size"):
        L.Conv2d(1, 1, 0)
    with pytest.raises(ValueError, match="eps"):
        L.LayerNorm(4, eps=0)
    with pytest.raises(ValueError, match="input_shape"):
        mlp(build=False).build((0,))
    with pytest.raises(TypeError, match="forward"):
        pgo.FunctionModel(None, {})
    with pytest.raises(ValueError, match="'w'"):
        pgo.FunctionModel(lambda x, p: x, {"w": (0, 3)})
    with pytest.raises(TypeError, match="Tensor"):
        pgo.FunctionModel(lambda x, p: 3, {}).build((2,))
    with pytest.raises(ValueError, match="mul_mat"):
        pgo.FunctionModel(lambda x, p: ops.linear(x, p["w"]), {"w": (3, 5)}).build((4,))


def test_predict_and_evaluate_validation(trained):
    with pytest.raises(ValueError, match="x has samples of shape"):
        trained.predict(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="batch_size"):
        trained.predict(X, batch_size=0)
    with pytest.raises(ValueError, match="x contains NaN"):
        trained.predict(np.full((2, 6), np.nan))
    with pytest.raises(ValueError, match="x is empty"):
        trained.predict(np.zeros((0, 6)))
    with pytest.raises(ValueError, match="different lengths"):
        trained.evaluate(X, Y[:3])
    with pytest.raises(ValueError, match="unknown loss"):
        trained.evaluate(X, Y, loss="foo")
    with pytest.raises(ValueError, match="class ids"):
        trained.evaluate(X, Y + 3)
    with pytest.raises(ValueError, match="backend"):
        trained.predict(X, backend="nope")


# ---- lifetimes -------------------------------------------------------------------------------------------
def test_model_close_keeps_weights(trained):
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, **FAST)
    w, p = m.get_weights(), m.predict(X)
    m.close()
    m.close()  # idempotent
    assert same_weights(m.get_weights(), w)
    np.testing.assert_array_equal(m.predict(X), p)  # re-created on demand


def test_use_after_close_raises():
    ctx = Context(4)
    ctx.close()
    ctx.close()
    with pytest.raises(ClosedError, match="closed"):
        ctx.ptr
    assert ctx.closed and "closed" in repr(ctx)
    with Result() as r:
        pass
    with pytest.raises(ClosedError):
        r.loss()
    ds = Dataset(3, 2, 4)
    ds.close()
    with pytest.raises(ValueError, match="closed"):
        ds.get_batch_host(0, 2)
    with Scheduler.for_device("cpu", 1) as s:
        backend = s.main
    with pytest.raises(ClosedError):
        s.compute(None)
    assert not backend.closed  # the scheduler's backends are separate owners: still usable
    backend.set_n_threads(1)
    backend.close()
    with GGUFFile() as f:
        f.set("a", 1)
    with pytest.raises(ClosedError):
        f.get("a")
    # a buffer keeps its context and backend alive; closing it does not close them
    ctx, be = Context(2), Backend("cpu", 1)
    ops.new_input(ctx, (3, 4))
    buf = Buffer(ctx, be)
    assert buf.nbytes >= 48
    buf.close()
    assert not ctx.closed and not be.closed
    with pytest.raises(ClosedError):
        buf.nbytes


def test_verbose_output(capsys, data):
    x, y = data
    mlp().fit(x[:32], y[:32], epochs=2, batch_size=8, verbose=2, n_threads=1, validation_split=0.25)
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 2 and lines[0].startswith("epoch 1/2") and "loss" in lines[0] and "val_loss" in lines[0]
    assert "acc" in lines[1] and "%" in lines[1]
    mlp().fit(x[:32], y[:32], epochs=1, batch_size=8, verbose=1, n_threads=1)
    out = capsys.readouterr().out
    assert "\r" in out and "ETA" in out and "epoch 1/1" in out
    mlp().fit(x[:32], y[:32], epochs=1, batch_size=8, verbose=0, n_threads=1)
    assert capsys.readouterr().out == ""


def test_models_without_trainable_parameters():
    """A parameter-free model predicts; fitting it (or a model whose output ignores its parameters)
    is a ValueError, not ggml's abort in ggml_build_backward_expand."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    m = pgo.Sequential([L.Softmax()], input_shape=(4,))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(m.predict(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError, match="trainable parameter"):
        m.fit(x, np.eye(4)[[0, 1]], **FAST)
    m.close()
    m2 = pgo.FunctionModel(lambda x, p: ops.scale(x, 2.0), {"w": (3,)}, input_shape=(4,))
    with pytest.raises(ValueError, match="trainable parameter"):
        m2.fit(x, np.eye(4)[[0, 1]], **FAST)
    np.testing.assert_array_equal(m2.predict(x, logits=True), 2 * x)
    # a declared but unused parameter next to used ones is fine
    m3 = pgo.FunctionModel(lambda x, p: ops.linear(x, p["w"]), {"w": (3, 4), "unused": (2,)}, input_shape=(4,))
    m3.fit(x, [0, 2], epochs=2, batch_size=2, **FAST)
    assert np.array_equal(m3.get_weights()["unused"], np.zeros(2, np.float32))


def test_zero_epochs_is_a_no_op(data):
    x, y = data
    m = mlp()
    w0 = m.get_weights()
    hist = m.fit(x, y, epochs=0, **FAST)
    assert hist.epoch == [] and same_weights(m.get_weights(), w0)


def test_refit_continues_training(data):
    """A second fit starts from the current weights (not re-initialised)."""
    x, y = data
    a = mlp()
    a.fit(x, y, epochs=1, batch_size=16, seed=1, **FAST)
    w1 = a.get_weights()
    a.fit(x, y, epochs=1, batch_size=16, seed=1, **FAST)
    assert max_diff(a.get_weights(), w1) > 0
    b = mlp()
    b.set_weights(w1)
    b.fit(x, y, epochs=1, batch_size=16, seed=1, **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    with pytest.raises(ValueError, match=r"x has samples of shape \(5,\), the model expects \(6,\)"):
        a.fit(x[:, :5], y, epochs=1, **FAST)
