"""fit(loss=fn): a loss function built from pgo.ops. One full-batch SGD step against float64 numpy
gradients (a weighted squared error with its weights in the label rows, a log-cosh), the loss fit,
validation and evaluate report, scalar losses and gradient accumulation, sample weights, errors before
training, saving, checkpoints and copies."""
import copy
import math
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from support import FAST, max_diff

N, F, K = 16, 5, 3
LOG2 = math.log(2.0)


def weighted_squares(outputs, labels):
    """mean over the outputs of (o - y)^2 c, with targets y and per-output weights c in the label rows."""
    y, c = ops.columns(labels, 0, K), ops.columns(labels, K, 2 * K)
    return ops.mean(ops.mul(ops.sqr(outputs - y), c))


def log_cosh(outputs, labels):
    """mean over the outputs of log(cosh(o - y)) = d + softplus(-2 d) - log 2: per-sample losses (n,)."""
    d = outputs - labels
    per = ops.mean(ops.scale(d + ops.softplus(ops.scale(d, -2.0)), 1.0, -LOG2))
    return ops.reshape(per, per.shape[0])


def mean_squares(outputs, labels):
    """The batch's mean squared error, as a scalar."""
    n, k = outputs.shape
    return ops.scale(ops.sum(ops.sqr(outputs - labels)), 1.0 / (n * k))


def per_sample_squares(outputs, labels):
    return ops.mean(ops.sqr(outputs - labels))


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, F)).astype(np.float32)
    y = rng.normal(size=(N, K)) * 1.5
    c = rng.uniform(0.2, 2.0, size=(N, K))
    return x, y, c


def linear(seed=4):
    m = pgo.Sequential([L.Linear(F, K)])
    m.build((F,), seed=seed)
    return m


def logits(w, x):
    return x.astype(np.float64) @ w["0.weight"].T.astype(np.float64) + w["0.bias"]


def numpy_loss_and_grad(fn, z, y, c):
    """Per-sample losses (N,) and d(mean loss)/dz (N, K), float64."""
    d = z - y
    if fn is weighted_squares:
        return (d ** 2 * c).mean(axis=1), 2 * d * c / K / N
    return (np.logaddexp(d, -d) - LOG2).mean(axis=1), np.tanh(d) / K / N   # log_cosh


@pytest.mark.parametrize("fn", [weighted_squares, log_cosh])
def test_one_full_batch_sgd_step_matches_numpy(fn):
    x, y, c = data()
    labels = np.c_[y, c] if fn is weighted_squares else y
    m = linear()
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    per, dz = numpy_loss_and_grad(fn, logits(w0, x), y, c)
    lr = 0.5
    h = m.fit(x, labels, epochs=1, batch_size=N, shuffle=False, loss=fn, optimizer=pgo.SGD(lr=lr), **FAST)
    got = m.get_weights()
    # float32 forward and gradients of values of order 1: agreement to a few float32 ulps
    assert max_diff(got, {"0.weight": w0["0.weight"] - lr * dz.T @ x, "0.bias": w0["0.bias"] - lr * dz.sum(axis=0)}) \
        < 2e-6
    assert h["loss"][0] == pytest.approx(per.mean(), rel=1e-6)   # the loss before the step
    assert math.isnan(h["accuracy"][0])   # no default accuracy for a loss function
    # evaluate computes the loss in the forward graph, per sample, from the model's loss function
    assert m.loss is fn
    after = numpy_loss_and_grad(fn, logits(got, x), y, c)[0]
    loss, loss_unc, _, _ = m.evaluate(x, labels, return_uncertainty=True)
    assert loss == pytest.approx(after.mean(), rel=1e-5)
    assert loss_unc == pytest.approx(after.std(ddof=1) / math.sqrt(N), rel=1e-4)


def test_validation_reports_the_loss_function_and_metrics():
    x, y, _ = data()
    m = linear()
    h = m.fit(x, y, epochs=2, batch_size=4, validation_split=0.25, loss=log_cosh, metrics=["mae"], **FAST)
    v = x[12:], y[12:]
    assert h["val_loss"][-1] == pytest.approx(m.evaluate(*v)[0], rel=1e-12)
    z = m.predict(x[12:]).astype(np.float64)
    assert h["val_mae"][-1] == pytest.approx(np.abs(z - y[12:]).mean(), rel=1e-6)
    assert m.evaluate(*v, metrics=["mse", "mae"], return_dict=True)["mae"] == h["val_mae"][-1]
    np.testing.assert_array_equal(m.predict(x), m.predict(x, logits=True))   # raw outputs


def test_a_scalar_loss_trains_as_its_per_sample_twin():
    """A loss function that returns the batch's mean trains as one returning per-sample losses, also
    when gradients are accumulated over physical batches; its evaluate has no uncertainty."""
    x, y, _ = data()
    a, b = linear(), linear()
    kw = dict(epochs=3, batch_size=8, physical_batch_size=4, validation_split=0.25, optimizer=pgo.SGD(lr=0.3), **FAST)
    ha = a.fit(x, y, loss=per_sample_squares, **kw)
    hb = b.fit(x, y, loss=mean_squares, **kw)
    assert max_diff(a.get_weights(), b.get_weights()) < 1e-6
    np.testing.assert_allclose(hb["loss"], ha["loss"], rtol=1e-6)
    np.testing.assert_allclose(hb["val_loss"], ha["val_loss"], rtol=1e-6)
    loss, loss_unc = b.evaluate(x, y, batch_size=5, return_uncertainty=True)[:2]   # batches of 5, 5, 5, 1
    assert loss == pytest.approx(a.evaluate(x, y)[0], rel=1e-6) and math.isnan(loss_unc)
    assert loss == pytest.approx(b.evaluate(x, y, loss="mse")[0], rel=1e-6)


def test_sample_weights_apply_to_a_loss_function():
    x, y, _ = data()
    w = np.linspace(0.0, 2.0, N)
    m = linear()
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    m.fit(x, y, epochs=1, batch_size=N, loss=log_cosh, sample_weight=w, optimizer=pgo.SGD(lr=0.5), **FAST)
    dz = (w / w.sum())[:, None] * np.tanh(logits(w0, x) - y) / K
    np.testing.assert_allclose(m.get_weights()["0.bias"], w0["0.bias"] - 0.5 * dz.sum(axis=0), rtol=0, atol=2e-6)
    with pytest.raises(ValueError, match="sample_weight needs a loss function that returns per-sample losses"):
        linear().fit(x, y, loss=mean_squares, sample_weight=w, **FAST)


def raises(outputs, labels):
    raise KeyError("no such column")


@pytest.mark.parametrize("fn, labels, error, match", [
    (raises, None, ValueError, r"the loss function raises\(outputs \(2, 3\), labels \(2, 3\)\) raised KeyError: "
                               "'no such column'"),
    (lambda o, y: 1.0, None, TypeError, "must return a Tensor built with pyggml_opt.ops, got float"),
    (lambda o, y: o - y, None, ValueError, r"must return per-sample losses of shape \(2,\) or \(2, 1\), or a scalar "
                                           r"\(the batch's mean\), got shape \(2, 3\)"),
    (per_sample_squares, "wide", ValueError, r"raised ValueError: .*cannot be broadcast"),
    (lambda o, y: ops.mean(y), None, ValueError, "does not depend on any trainable parameter"),
    (per_sample_squares, "3d", ValueError, r"y must hold float label rows \(n, k\) for a loss function"),
    (per_sample_squares, "nan", ValueError, "y contains NaN or inf"),
    (42, None, ValueError, r"unknown loss 42; expected one of .* or a loss function fn\(outputs, labels\)"),
])
def test_bad_loss_functions_are_refused_before_training(fn, labels, error, match):
    x, y, _ = data()
    y = {None: y, "wide": np.c_[y, y], "3d": y[:, :, None], "nan": np.where(y > 1, np.nan, y)}[labels]
    m = linear()
    w0 = m.get_weights()
    with pytest.raises(error, match=match):
        m.fit(x, y, epochs=1, loss=fn, **FAST)
    assert max_diff(m.get_weights(), w0) == 0 and m.history is None and m.loss is None


def test_validation_labels_must_be_as_wide_as_the_training_labels():
    x, y, _ = data()
    with pytest.raises(ValueError, match="validation_data.1. has label rows of width 6, y of 3"):
        linear().fit(x, y, loss=per_sample_squares, validation_data=(x, np.c_[y, y]), **FAST)


def test_saving_names_the_function_and_evaluate_needs_it_again(tmp_path):
    x, y, _ = data()
    m = linear()
    m.fit(x, y, epochs=2, batch_size=8, loss=log_cosh, **FAST)
    m.save(tmp_path / "m.gguf")
    loaded = pgo.load(tmp_path / "m.gguf")
    assert loaded.loss == "custom:log_cosh"
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))   # raw outputs
    with pytest.raises(ValueError, match="trained with the loss function 'log_cosh', which a model file cannot hold"):
        loaded.evaluate(x, y)
    assert loaded.evaluate(x, y, loss=log_cosh) == m.evaluate(x, y)


def test_resuming_a_checkpoint_needs_the_function_again(tmp_path):
    x, y, _ = data()
    kw = dict(batch_size=4, loss=log_cosh, optimizer=pgo.AdamW(lr=1e-2), seed=2, **FAST)
    straight = linear()
    straight.fit(x, y, epochs=3, **kw)
    first = linear()
    first.fit(x, y, epochs=1, callbacks=[pgo.ModelCheckpoint(tmp_path / "ckpt.gguf")], **kw)
    with pytest.raises(ValueError, match="trained with the loss function 'log_cosh', which a checkpoint cannot hold"):
        linear().fit(x, y, epochs=3, batch_size=4, seed=2, resume_from=tmp_path / "ckpt.gguf", **FAST)
    with pytest.raises(ValueError, match=r"has the metrics \['accuracy', 'loss'\], this fit reports \['loss', 'mae'\]"):
        linear().fit(x, y, epochs=3, resume_from=tmp_path / "ckpt.gguf", metrics=["mae"], **kw)
    resumed = linear()
    h = resumed.fit(x, y, epochs=3, resume_from=tmp_path / "ckpt.gguf", **kw)
    assert h["loss"] == straight.history["loss"]
    assert max_diff(resumed.get_weights(), straight.get_weights()) == 0   # bit-identical on the CPU


def test_copies_and_pickles_keep_the_function():
    x, y, _ = data()
    m = linear()
    m.fit(x, y, epochs=1, batch_size=8, loss=log_cosh, **FAST)
    for other in (copy.deepcopy(m), m.clone(), pickle.loads(pickle.dumps(m))):   # a module-level function pickles
        assert other.loss is log_cosh and other.evaluate(x, y) == m.evaluate(x, y)
