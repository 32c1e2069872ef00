"""The losses fit builds itself (mae, huber, binary_cross_entropy on logits): one full-batch SGD step
against float64 numpy gradients, the loss fit reports, evaluate, predict's probabilities, weights and
bad targets."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST

N, F, K = 16, 5, 3


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, F)).astype(np.float32)
    y = rng.normal(size=(N, K)) * 1.5   # errors on both sides of Huber's delta of 1
    return x, y


def linear(seed=4):
    m = pgo.Sequential([L.Linear(F, K)])
    m.build((F,), seed=seed)
    return m


def numpy_loss_and_grad(loss, z, y):
    """Per-sample losses (N,) and d(mean loss)/dz (N, K), float64."""
    d = z - y
    if loss == "mae":
        return np.abs(d).mean(axis=1), np.sign(d) / K / N
    if loss == "huber":
        per = np.where(np.abs(d) < 1, 0.5 * d ** 2, np.abs(d) - 0.5)
        return per.mean(axis=1), np.clip(d, -1, 1) / K / N
    p = 1 / (1 + np.exp(-z))   # binary_cross_entropy on logits
    return (np.logaddexp(0, z) - y * z).mean(axis=1), (p - y) / K / N


@pytest.mark.parametrize("loss", ["mae", "huber", "binary_cross_entropy"])
def test_one_full_batch_sgd_step_matches_numpy(loss):
    x, y = data()
    if loss == "binary_cross_entropy":
        y = (y > 0).astype(np.float64) * 0.9 + 0.05   # soft labels in [0, 1]
    m = linear()
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    z = x.astype(np.float64) @ w0["0.weight"].T + w0["0.bias"]
    per, dz = numpy_loss_and_grad(loss, z, y)
    lr = 0.5
    h = m.fit(x, y, epochs=1, batch_size=N, shuffle=False, loss=loss, optimizer=pgo.SGD(lr=lr), **FAST)
    got = m.get_weights()
    np.testing.assert_allclose(got["0.weight"], w0["0.weight"] - lr * dz.T @ x, rtol=0, atol=2e-6)
    np.testing.assert_allclose(got["0.bias"], w0["0.bias"] - lr * dz.sum(axis=0), rtol=0, atol=2e-6)
    assert h["loss"][0] == pytest.approx(per.mean(), rel=1e-6)   # the loss before the step
    # evaluate computes the same loss on the host (float64) from the trained model's outputs
    z1 = x.astype(np.float64) @ got["0.weight"].T.astype(np.float64) + got["0.bias"]
    assert m.evaluate(x, y)[0] == pytest.approx(numpy_loss_and_grad(loss, z1, y)[0].mean(), rel=1e-5)


def test_binary_cross_entropy_learns_labels_and_predicts_probabilities():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 4)).astype(np.float32)
    y = np.c_[x[:, 0] + x[:, 1] > 0, x[:, 2] > 0.5].astype(np.float32)   # two independent binary labels
    m = pgo.Sequential([L.Linear(4, 16), L.ReLU(), L.Linear(16, 2)])
    h = m.fit(x, y, epochs=20, batch_size=32, loss="binary_cross_entropy", optimizer=pgo.AdamW(lr=1e-2),
              validation_split=0.25, **FAST)
    p = m.predict(x)
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-m.predict(x, logits=True).astype(np.float64))), atol=1e-6)
    assert ((p > 0.5) == (y > 0.5)).mean() > 0.95
    assert h["accuracy"][-1] > 0.95 and h["val_accuracy"][-1] > 0.9   # per label, as Keras's binary accuracy


def test_weights_apply_to_the_new_losses():
    x, y = data()
    w = np.arange(N, dtype=np.float64)
    a, b = linear(), linear()
    a.fit(x, y, epochs=2, batch_size=N, shuffle=False, loss="huber", sample_weight=w, **FAST)
    b.fit(x[w > 0], y[w > 0], epochs=2, batch_size=N - 1, shuffle=False, loss="huber", sample_weight=w[w > 0],
          **FAST)
    assert max(float(np.abs(a.get_weights()[k] - b.get_weights()[k]).max()) for k in ("0.weight", "0.bias")) < 1e-6


@pytest.mark.parametrize("loss, y, match", [
    ("binary_cross_entropy", np.full((N, K), 2.0), r"in \[0, 1\]"),
    ("mae", np.zeros((N, K + 1)), "must have shape"),
    ("hinge", np.zeros((N, K)), "unknown loss 'hinge'; expected one of .*'huber'"),
])
def test_bad_targets_and_names(loss, y, match):
    x, _ = data()
    with pytest.raises(ValueError, match=match):
        linear().fit(x, y, epochs=1, loss=loss, **FAST)


class LogCosh(pgo.Loss):
    """log cosh(o - y) per output, averaged over a sample's outputs: a loss class of the user's."""

    name = "test_log_cosh"

    def per_sample(self, outputs, y, constants):
        d = outputs - y   # log cosh d = softplus(2 d) - d - log 2
        return pgo.ops.mean(pgo.ops.scale(pgo.ops.softplus(pgo.ops.scale(d, 2.0)) - d, 1.0, -np.log(2.0)))

    def host(self, outputs, targets):
        d = outputs.astype(np.float64) - targets
        return (np.logaddexp(0.0, 2 * d) - d - np.log(2.0)).mean(axis=1)


class GraphOnly(LogCosh):
    """The same loss without a numpy twin: validation and evaluate compute it in the forward graph."""

    name = "test_log_cosh_graph"
    host = pgo.Loss.host


def test_a_loss_class_of_ones_own_trains_as_numpy_says_and_is_known_by_name_after_registering(tmp_path):
    x, y = data()
    z = linear().predict(x).astype(np.float64)
    d = z - y
    want = (np.logaddexp(0.0, 2 * d) - d - np.log(2.0)).mean()   # float64 log cosh of the initial outputs
    grad = np.tanh(d) / K / N                                    # d(mean loss)/dz
    w0 = linear().get_weights()
    lr = 0.1
    m = linear()
    m.fit(x, y, epochs=1, batch_size=N, shuffle=False, loss=LogCosh(), optimizer=pgo.SGD(lr=lr), **FAST)
    # one full-batch SGD step: W -= lr * dL/dW, dL/dW = grad^T x
    np.testing.assert_allclose(m.get_weights()["0.weight"], w0["0.weight"] - lr * grad.T @ x, rtol=1e-5, atol=1e-6)
    assert m.history["loss"][0] == pytest.approx(want, rel=1e-5)
    # host and graph evaluation agree (float64 numpy vs float32 graph: ~1e-7 relative)
    host = m.evaluate(x, y, loss=LogCosh(), metrics=["mae"])
    graph = m.evaluate(x, y, loss=GraphOnly(), metrics=["mae"])
    assert host[0] == pytest.approx(graph[0], rel=1e-5) and host[1] == graph[1]
    # unregistered: the file names it as code, which a load cannot give back
    m.save(tmp_path / "m.gguf")
    with pytest.raises(ValueError, match="loss function 'test_log_cosh', which a model file cannot hold"):
        pgo.load(tmp_path / "m.gguf").evaluate(x, y)
    pgo.register_loss(LogCosh)   # for the rest of this process (registering the same class again is no error)
    m.save(tmp_path / "m.gguf")
    loaded = pgo.load(tmp_path / "m.gguf")
    assert loaded.loss == "test_log_cosh" and loaded.evaluate(x, y, metrics=["mae"]) == host
    a = linear()
    a.fit(x, y, epochs=1, batch_size=N, shuffle=False, loss="test_log_cosh", optimizer=pgo.SGD(lr=lr), **FAST)
    assert a.get_weights()["0.weight"].tobytes() == m.get_weights()["0.weight"].tobytes()
    with pytest.raises(ValueError, match="already registered"):
        pgo.register_loss(type("Other", (LogCosh,), {}))


def test_register_loss_refuses_what_is_not_a_named_loss_class():
    with pytest.raises(TypeError, match="takes a Loss subclass"):
        pgo.register_loss(LogCosh())
    with pytest.raises(ValueError, match="not starting with 'custom:'"):
        pgo.register_loss(type("Bad", (LogCosh,), {"name": "custom:x"}))
    with pytest.raises(ValueError, match="already registered"):
        pgo.register_loss(type("Mse", (LogCosh,), {"name": "mse"}))
