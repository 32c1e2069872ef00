"""fit end to end on small generated data: learning, batching, shuffling, determinism, optimizers,
learning-rate schedules and losses. CPU backend, one thread, a few hundred samples."""
from __future__ import annotations

import math

import numpy as np
import pytest
from support import FAST, blobs, max_diff, mlp, same_weights

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt.training.batching import epoch_order


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


# tiling windows; overlapping padded ones; windows entirely in the padding (-FLT_MAX after a ReLU, so
# these keep the written order)
@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 1), (2, 2, 2), (1, 1, 1)])
def test_relu_before_max_pooling_trains_as_written(kernel, stride, padding):
    """Sequential applies a ReLU written before a max pooling after it where every window holds an input
    value (on the pooled values): its outputs and the weights it trains equal those of the ops in the
    order written (a FunctionModel over the same weights), bit for bit."""
    x, y = bars()
    side = (8 + 2 * padding - kernel) // stride + 1
    seq = pgo.Sequential([L.Conv2d(1, 4, 3, padding=1), L.ReLU(), L.MaxPool2d(kernel, stride, padding), L.Flatten(),
                          L.Linear(4 * side * side, 2)], input_shape=(1, 8, 8))

    def written(h, p):
        h = ops.add(ops.conv_2d(h, p["0.kernel"], padding=1), p["0.bias"])
        h = ops.pool_2d(ops.relu(h), "max", kernel, stride, padding)
        return ops.linear(ops.flatten(h), p["4.weight"], p["4.bias"])

    ref = pgo.FunctionModel(written, seq.param_shapes, input_shape=(1, 8, 8))
    ref.set_weights(seq.get_weights())
    ref.loss = seq.loss = "cross_entropy"
    np.testing.assert_array_equal(seq.predict(x), ref.predict(x))
    for m in (seq, ref):
        m.fit(x, y, epochs=3, batch_size=20, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert same_weights(seq.get_weights(), ref.get_weights())
    assert seq.history["loss"] == ref.history["loss"]
    if padding < kernel:  # else -FLT_MAX outputs make the loss inf: a model to keep as written, not to train
        assert seq.history["loss"][-1] < seq.history["loss"][0]


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


def test_x_read_in_place_or_copied_trains_alike(data):
    """A C-contiguous float32 x is trained on in place (fit makes no copy of the samples, whatever the
    array's alignment); other layouts and dtypes are copied once. All train bit-identically, and fit
    never writes into x."""
    x, y = data[0][:96], data[1][:96]
    raw = np.zeros(x.nbytes + 4, np.uint8)
    misaligned = np.frombuffer(raw.data, np.float32, x.size, offset=4).reshape(x.shape)  # 4 bytes past 32
    misaligned[...] = x
    before = x.copy()
    results = []
    for arr, in_place in [(x, True), (misaligned, True), (np.asfortranarray(x), False),
                          (x.astype(np.float64), False)]:
        shared = []
        probe = pgo.LambdaCallback(on_epoch_end=lambda m, e, logs: shared.append(
            np.shares_memory(probe.trainer.train.x, arr)))
        model = mlp()
        h = model.fit(arr, y, epochs=2, batch_size=16, validation_split=0.25, seed=2, callbacks=[probe], **FAST)
        assert shared == [in_place] * 2
        results.append((model.get_weights(), h["loss"]))
    for other in results[1:]:
        assert same_weights(results[0][0], other[0])
        assert results[0][1] == other[1]
    np.testing.assert_array_equal(x, before)


def test_read_only_and_memory_mapped_x_train_in_place(data, tmp_path):
    """fit only reads x: a read-only array and an np.load(mmap_mode="r") file train as a writable copy
    of the same samples does, bit for bit."""
    x, y = data[0][:64], data[1][:64]
    np.save(tmp_path / "x.npy", x)
    read_only = x.copy()
    read_only.setflags(write=False)
    results = []
    for arr in (x, read_only, np.load(tmp_path / "x.npy", mmap_mode="r")):
        model = mlp()
        h = model.fit(arr, y, epochs=2, batch_size=16, seed=4, **FAST)
        results.append((model.get_weights(), h["loss"]))
    for other in results[1:]:
        assert same_weights(results[0][0], other[0])
        assert results[0][1] == other[1]


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
    order = epoch_order(np.random.default_rng(0), n, run)
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


@pytest.mark.parametrize("shuffle,run", [(4, 4), ("batch", 16), (True, 1)])
def test_fit_trains_in_the_seeded_epoch_order(shuffle, run, data):
    """shuffle=k: each epoch trains on the samples in ``epoch_order(default_rng(seed), n, k)``, a new
    order of runs of k consecutive samples every epoch: bit-identical to fitting the samples put in
    those orders by hand without shuffling (SGD keeps no state between fits)."""
    x, y = data
    n, seed = 160, 4  # a multiple of 16: no wrapped-around partial batch
    a = mlp()
    a.fit(x[:n], y[:n], epochs=2, batch_size=16, physical_batch_size=8, shuffle=shuffle, seed=seed,
          optimizer=pgo.SGD(lr=0.1), **FAST)
    rng = np.random.default_rng(seed)
    orders = [epoch_order(rng, n, run) for _ in range(2)]
    assert orders[0].tolist() != orders[1].tolist()
    b = mlp()
    for order in orders:
        b.fit(x[order], y[order], epochs=1, batch_size=16, physical_batch_size=8, shuffle=False,
              optimizer=pgo.SGD(lr=0.1), **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    c = mlp()
    c.fit(x[:n], y[:n], epochs=2, batch_size=16, physical_batch_size=8, shuffle=shuffle, seed=seed + 1,
          optimizer=pgo.SGD(lr=0.1), **FAST)
    assert max_diff(a.get_weights(), c.get_weights()) > 1e-6


def test_seed_initialises_weights(data):
    x, y = data
    a, b, c = mlp(build=False), mlp(build=False), mlp(build=False)
    a.build((6,), seed=3), b.build((6,), seed=3), c.build((6,), seed=4)
    assert same_weights(a.get_weights(), b.get_weights())
    assert max_diff(a.get_weights(), c.get_weights()) > 1e-3


def test_seeded_weights_are_uniform_draws_in_layer_order():
    """PyTorch's default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn in float64 from the
    seed's generator, parameter after parameter: a weight larger than the draws made per call (here
    300 x 100) gets exactly the values of one draw of its whole size."""
    m = pgo.Sequential([L.Linear(300, 100), L.ReLU(), L.Linear(100, 3)]).build((300,), seed=5)
    rng = np.random.default_rng(5)
    want = {}
    for name, shape, fan_in in (("0.weight", (100, 300), 300), ("0.bias", (100,), 300),
                                ("2.weight", (3, 100), 100), ("2.bias", (3,), 100)):
        want[name] = rng.uniform(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), size=shape).astype(np.float32)
    got = m.get_weights()
    assert list(got) == list(want)
    assert same_weights(got, want)


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


def test_in_graph_gather_equals_host_gather(data):
    """On the CPU, fit's graph gathers each batch from the dataset itself (GET_ROWS) and the labels of an
    epoch are put in batch order at once (gather="graph", the CPU's default); gather="host" copies each
    batch with numpy, as other backends do. Same rows in the same order, so bit-identical training:
    for an MLP and for a CNN, whose input is reshaped to (channels, height, width) after the gather."""
    xb, yb = bars(n=60)
    cases = [(lambda: mlp(), data[0][:100], data[1][:100], 16, 8),
             (lambda: pgo.Sequential([L.Conv2d(1, 4, 3, padding=1), L.ReLU(), L.MaxPool2d(2), L.Flatten(),
                                      L.Linear(64, 2)]), xb, yb, 20, 10)]
    for make, x, y, batch, physical in cases:
        results, used = [], []
        for gather in ("auto", "graph", "host"):
            probe = pgo.LambdaCallback(on_epoch_end=lambda m, e, logs: used.append(probe.trainer.train.gathers_in_graph))
            m = make()
            h = m.fit(x, y, epochs=2, batch_size=batch, physical_batch_size=physical, validation_split=0.2,
                      seed=3, gather=gather, callbacks=[probe], **FAST)
            results.append((m.get_weights(), h["loss"], h["val_loss"]))
        assert used == [True, True, True, True, False, False]
        for other in results[1:]:
            assert same_weights(results[0][0], other[0])
            assert results[0][1:] == other[1:]


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


def test_batch_size_above_the_sample_count_is_cut_to_it(data):
    """batch_size=1000 on 150 samples trains on batches of 150 (Keras and PyTorch do the same), not on
    150 samples repeated to fill 1000: bit-identical to batch_size=150, one step per epoch."""
    x, y = data[0][:150], data[1][:150]
    steps = []
    count = pgo.LambdaCallback(on_batch_end=lambda m, b, logs: steps.append(b))
    a = mlp()
    ha = a.fit(x, y, epochs=2, batch_size=1000, physical_batch_size=500, seed=2, callbacks=[count], **FAST)
    b = mlp()
    hb = b.fit(x, y, epochs=2, batch_size=150, seed=2, **FAST)
    assert steps == [0, 0]
    assert same_weights(a.get_weights(), b.get_weights()) and ha["loss"] == hb["loss"]
    c = mlp()  # a physical batch that still divides the cut batch stays
    hc = c.fit(x, y, epochs=2, batch_size=300, physical_batch_size=75, seed=2, **FAST)
    assert max_diff(c.get_weights(), b.get_weights()) < 1e-5 and len(hc.epoch) == 2
