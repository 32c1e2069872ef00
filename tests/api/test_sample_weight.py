"""fit(sample_weight=..., class_weight=...): each optimizer step minimises the weighted mean loss of
its batch. Checked against float64 numpy gradients of one full-batch SGD step, and by equivalences
(weights of one, class weights as sample weights, zero weights as removed samples)."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, blobs, max_diff, mlp

N = 12


def linear(n_in=4, n_out=3, seed=3):
    m = pgo.Sequential([L.Linear(n_in, n_out)])
    m.build((n_in,), seed=seed)
    return m


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 4)).astype(np.float32)
    y = rng.integers(0, 3, N)
    w = rng.uniform(0.0, 3.0, N)
    w[[2, 7]] = 0.0
    return x, y, w


def log_softmax64(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_one_full_batch_sgd_step_matches_numpy(loss):
    x, y, w = data()
    m = linear()
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    t = np.eye(3)[y] if loss == "cross_entropy" else np.random.default_rng(1).normal(size=(N, 3))
    lr = 0.5
    h = m.fit(x, y if loss == "cross_entropy" else t, epochs=1, batch_size=N, shuffle=False, loss=loss,
              optimizer=pgo.SGD(lr=lr), sample_weight=w, **FAST)

    z = x.astype(np.float64) @ w0["0.weight"].T + w0["0.bias"]
    p = w / w.sum()
    if loss == "cross_entropy":
        per = -(t * log_softmax64(z)).sum(axis=1)
        dz = p[:, None] * (np.exp(log_softmax64(z)) - t)
    else:
        per = ((z - t) ** 2).mean(axis=1)
        dz = p[:, None] * 2 * (z - t) / 3
    want = {"0.weight": w0["0.weight"] - lr * dz.T @ x, "0.bias": w0["0.bias"] - lr * dz.sum(axis=0)}
    got = m.get_weights()
    # float32 forward and gradients of values of order 1: agreement to a few float32 ulps
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=2e-6)
    # the loss reported for the epoch is the weighted mean loss before the step
    assert h["loss"][0] == pytest.approx(float((p * per).sum()), rel=1e-6)


def test_weights_of_one_train_as_no_weights():
    x, y = blobs(n=120)
    a, b = mlp(), mlp()
    ha = a.fit(x, y, epochs=3, batch_size=20, seed=4, **FAST)
    hb = b.fit(x, y, epochs=3, batch_size=20, seed=4, sample_weight=np.ones(len(y)), **FAST)
    # the weighted path computes log-softmax and the loss itself: equal up to float32 rounding
    assert max_diff(a.get_weights(), b.get_weights()) < 1e-6
    np.testing.assert_allclose(hb["loss"], ha["loss"], rtol=1e-6)
    assert hb["accuracy"] == ha["accuracy"]  # counted on the host here, by ggml-opt there


def test_class_weight_is_a_sample_weight_per_class():
    x, y = blobs(n=120)
    cw = {0: 0.5, 2: 4.0}  # class 1 unnamed: weight 1
    a, b = mlp(), mlp()
    a.fit(x, y, epochs=2, batch_size=30, seed=2, class_weight=cw, **FAST)
    b.fit(x, y, epochs=2, batch_size=30, seed=2, sample_weight=np.array([0.5, 1.0, 4.0])[y], **FAST)
    assert max_diff(a.get_weights(), b.get_weights()) == 0.0


def test_sample_weight_and_class_weight_multiply():
    x, y = blobs(n=60)
    sw = np.linspace(0.1, 2.0, 60)
    a, b = mlp(), mlp()
    a.fit(x, y, epochs=1, batch_size=60, shuffle=False, sample_weight=sw, class_weight={1: 3.0}, **FAST)
    b.fit(x, y, epochs=1, batch_size=60, shuffle=False, sample_weight=sw * np.where(y == 1, 3.0, 1.0), **FAST)
    assert max_diff(a.get_weights(), b.get_weights()) == 0.0


def test_zero_weight_is_a_removed_sample():
    x, y, w = data()
    keep = w > 0
    a, b = linear(), linear()
    a.fit(x, y, epochs=4, batch_size=N, shuffle=False, sample_weight=w, **FAST)
    b.fit(x[keep], y[keep], epochs=4, batch_size=int(keep.sum()), shuffle=False, sample_weight=w[keep], **FAST)
    assert max_diff(a.get_weights(), b.get_weights()) < 1e-6


def test_gradient_accumulation_keeps_the_weighted_mean_of_the_whole_batch():
    x, y, w = data()
    a, b = linear(), linear()
    a.fit(x, y, epochs=3, batch_size=N, shuffle=False, sample_weight=w, optimizer=pgo.SGD(lr=0.3), **FAST)
    b.fit(x, y, epochs=3, batch_size=N, physical_batch_size=N // 4, shuffle=False, sample_weight=w,
          optimizer=pgo.SGD(lr=0.3), **FAST)
    assert max_diff(a.get_weights(), b.get_weights()) < 1e-6


def test_weights_stay_with_their_samples_through_shuffling_and_validation():
    # all the weight on the samples of class 0: the model only ever sees class 0 and predicts it for
    # (nearly) every sample; weights shuffled apart from their samples would teach all three classes
    x, y = blobs(n=200)
    m = mlp()
    h = m.fit(x, y, epochs=5, batch_size=20, validation_split=0.2, sample_weight=(y == 0).astype(float),
              optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert (m.predict(x).argmax(axis=1) == 0).mean() > 0.95
    assert np.isfinite(h["val_loss"]).all() and np.isfinite(h["accuracy"]).all()


def test_evaluate_and_validation_weigh_the_loss_as_fit_does():
    """evaluate(sample_weight=) and validation_data=(x, y, w) (Keras's) give the weighted mean loss
    sum(w l) / sum(w) of float64 numpy, batch by batch as at once; validation_split keeps its samples'
    weights; metrics stay unweighted."""
    x, y, w = data()
    m = linear()
    wts = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    z = x @ wts["0.weight"].T + wts["0.bias"]
    per = -log_softmax64(z)[np.arange(N), y]
    accuracy = (z.argmax(axis=1) == y).mean()
    for batch_size in (N, 5):
        loss, acc = m.evaluate(x, y, sample_weight=w, batch_size=batch_size)
        assert loss == pytest.approx((w * per).sum() / w.sum(), rel=1e-6)
        assert acc == pytest.approx(accuracy)
    assert m.evaluate(x, y)[0] == pytest.approx(per.mean(), rel=1e-6)
    lr = 1e-30  # no step changes the weights: the validation loss is the one above
    h = m.fit(x, y, epochs=1, batch_size=N, validation_data=(x, y, w), optimizer=pgo.SGD(lr=lr), **FAST)
    assert h["val_loss"][0] == pytest.approx((w * per).sum() / w.sum(), rel=1e-6)
    x2, y2, w2 = np.r_[x, x], np.r_[y, y], np.r_[np.ones(N), w]
    h = m.fit(x2, y2, epochs=1, batch_size=N, validation_split=0.5, sample_weight=w2, optimizer=pgo.SGD(lr=lr),
              **FAST)
    assert h["val_loss"][0] == pytest.approx((w * per).sum() / w.sum(), rel=1e-6)
    with pytest.raises(ValueError, match="a pair .* or a triple"):
        m.fit(x, y, validation_data=(x, y, w, w), **FAST)
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(12,\)"):
        m.evaluate(x, y, sample_weight=w[:5])


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(sample_weight=np.ones(5)), ValueError, r"sample_weight must have shape \(12,\)"),
    (dict(sample_weight=-np.ones(12)), ValueError, "finite and >= 0"),
    (dict(sample_weight=np.full(12, np.nan)), ValueError, "finite and >= 0"),
    (dict(sample_weight=np.zeros(12)), ValueError, "every sample the weight 0"),
    (dict(sample_weight=["a"] * 12), TypeError, "sample_weight must hold numbers"),
    (dict(class_weight={3: 1.0}), ValueError, r"class ids in \[0, 3\)"),
    (dict(class_weight={"a": 1.0}), ValueError, "class ids"),
    (dict(class_weight={0: -1.0}), ValueError, r"class_weight\[0\] must be in"),
    (dict(class_weight=[1.0, 2.0]), TypeError, "class_weight must be a dict"),
    (dict(class_weight={0: 2.0}, loss="mse", y=np.zeros((12, 3))), ValueError, "class_weight needs loss='cross_entropy'"),
    (dict(sample_weight=np.ones(12), loss="sum"), ValueError, "need one of the losses"),
])
def test_bad_weights_are_refused(kwargs, err, match):
    x, y, _ = data()
    kwargs = dict(kwargs)
    y = kwargs.pop("y", y)
    with pytest.raises(err, match=match):
        linear().fit(x, y, epochs=1, **kwargs, **FAST)
