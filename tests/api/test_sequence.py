"""Sequence outputs (n, T, V) trained on token ids (n, T) with cross-entropy per token: one SGD step
and the reported loss against float64 numpy, evaluate's mean per-token loss in nats (PyTorch's
cross_entropy), predict's probabilities, weights, gradient accumulation and bad labels."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, max_diff

V, T, D, N = 7, 5, 4, 12


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, V, (N, T))
    return x, (x * 3 + 1) % V


def token_model(seed=1):
    m = pgo.Sequential([L.Embedding(V, D), L.Linear(D, V)])
    m.build((T,), seed=seed)
    return m


def log_softmax64(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def check_sgd_step(got, w0, x, dz, lr):
    """``got`` (the weights after one SGD step of rate ``lr`` from ``w0``) against float64 numpy, for
    the gradient ``dz`` of the loss with respect to the logits (N, T, V)."""
    emb = w0["0.weight"][x]
    d_table = np.zeros((V, D))
    np.add.at(d_table, x, dz @ w0["1.weight"])
    want = {"0.weight": w0["0.weight"] - lr * d_table,
            "1.weight": w0["1.weight"] - lr * np.einsum("ntv,ntd->vd", dz, emb),
            "1.bias": w0["1.bias"] - lr * dz.sum(axis=(0, 1))}
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=2e-6, err_msg=k)


def test_one_sgd_step_and_the_reported_loss_match_numpy():
    x, y = data()
    m = token_model()
    assert m.output_shape == (T, V)
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    emb = w0["0.weight"][x]                                     # (N, T, D)
    z = emb @ w0["1.weight"].T + w0["1.bias"]                   # (N, T, V)
    lsm = log_softmax64(z)
    per_token = -np.take_along_axis(lsm, y[..., None], axis=-1)[..., 0]
    dz = (np.exp(lsm) - np.eye(V)[y]) / (N * T)                 # mean over every token
    lr = 0.5
    h = m.fit(x, y, epochs=1, batch_size=N, shuffle=False, optimizer=pgo.SGD(lr=lr), **FAST)
    check_sgd_step(m.get_weights(), w0, x, dz, lr)
    assert h["loss"][0] == pytest.approx(per_token.mean(), rel=1e-6)
    assert h["accuracy"][0] == (z.argmax(axis=-1) == y).mean()   # per token


def test_ignored_targets_give_no_loss_and_no_gradient_and_weights_count_tokens():
    """Targets of IGNORE_INDEX (-100) leave the loss and the gradient; sample_weight = each sample's count
    of targets gives the mean over the batch's tokens (Hugging Face's Trainer, MLX-LM): one SGD step and
    the reported loss against float64 numpy of exactly that."""
    x, y = data()
    y = y.copy()
    y[:, :2] = pgo.nn.losses.IGNORE_INDEX   # a prompt of two tokens
    y[3] = pgo.nn.losses.IGNORE_INDEX       # a sample with nothing to learn
    y[5, 4] = pgo.nn.losses.IGNORE_INDEX
    keep = y >= 0
    m = token_model()
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    emb = w0["0.weight"][x]
    z = emb @ w0["1.weight"].T + w0["1.bias"]
    lsm = log_softmax64(z)
    ids = np.where(keep, y, 0)
    per_token = -np.take_along_axis(lsm, ids[..., None], axis=-1)[..., 0] * keep
    dz = (np.exp(lsm) - np.eye(V)[ids]) * keep[..., None] / keep.sum()   # the mean over the batch's targets
    lr = 0.5
    h = m.fit(x, y, epochs=1, batch_size=N, shuffle=False, optimizer=pgo.SGD(lr=lr), sample_weight=keep.sum(axis=1),
              **FAST)
    got = m.get_weights()
    check_sgd_step(got, w0, x, dz, lr)
    assert h["loss"][0] == pytest.approx(per_token.sum() / keep.sum(), rel=1e-6)
    assert h["accuracy"][0] == (z.argmax(axis=-1) == y)[keep].mean()   # the targets' tokens only
    # evaluate: each sample's mean over its targets (0 for the sample without any)
    w1 = {k: v.astype(np.float64) for k, v in got.items()}
    lsm1 = log_softmax64(w1["0.weight"][x] @ w1["1.weight"].T + w1["1.bias"])
    per_sample = (-np.take_along_axis(lsm1, ids[..., None], axis=-1)[..., 0] * keep).sum(1) / np.maximum(keep.sum(1), 1)
    assert m.evaluate(x, y)[0] == pytest.approx(per_sample.mean(), rel=1e-6)


def test_evaluate_and_predict():
    x, y = data()
    m = token_model()
    m.fit(x, y, epochs=3, batch_size=4, **FAST)
    w = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    z = w["0.weight"][x] @ w["1.weight"].T + w["1.bias"]
    lsm = log_softmax64(z)
    loss, acc = m.evaluate(x, y)
    assert loss == pytest.approx(-np.take_along_axis(lsm, y[..., None], axis=-1).mean(), rel=1e-5)  # nats/token
    assert acc == (z.argmax(axis=-1) == y).mean()
    p = m.predict(x)
    assert p.shape == (N, T, V)
    np.testing.assert_allclose(p, np.exp(lsm), atol=1e-6)


def test_a_sequence_model_learns_a_token_mapping():
    rng = np.random.default_rng(3)
    x = rng.integers(0, V, (400, T))
    y = (x * 3 + 1) % V
    m = pgo.Sequential([L.Embedding(V, 8), L.Linear(8, 16), L.ReLU(), L.Linear(16, V)])
    h = m.fit(x, y, epochs=15, batch_size=40, validation_split=0.1, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert h["val_accuracy"][-1] == 1.0 and h["val_loss"][-1] < 0.05


def test_weights_and_accumulation():
    x, y = data()
    w = np.linspace(0.0, 2.0, N)
    a, b, c = token_model(), token_model(), token_model()
    a.fit(x, y, epochs=2, batch_size=N, shuffle=False, sample_weight=w, **FAST)
    b.fit(x[1:], y[1:], epochs=2, batch_size=N - 1, shuffle=False, sample_weight=w[1:], **FAST)  # w[0] == 0
    assert max_diff(a.get_weights(), b.get_weights()) < 1e-6
    c.fit(x, y, epochs=2, batch_size=N, physical_batch_size=N // 3, shuffle=False, sample_weight=w, **FAST)
    assert max_diff(a.get_weights(), c.get_weights()) < 1e-6


@pytest.mark.parametrize("kwargs, match", [
    (dict(y=np.zeros(N, np.int64)), r"token ids of shape \(n, 5\)"),
    (dict(y=np.full((N, T), V)), r"token ids must be in \[0, 7\) or -100 \(no target\)"),
    (dict(y=np.full((N, T), -1)), r"token ids must be in \[0, 7\) or -100 .* got range \[-1, -1\]"),
    (dict(y=np.full((N, T), 0.5)), "token ids must be integers"),
    (dict(loss="mse"), "trains with loss='cross_entropy' on token ids"),
    (dict(class_weight={0: 2.0}), "class_weight is for models with one class per sample"),
])
def test_bad_sequence_labels(kwargs, match):
    x, y = data()
    kwargs = dict(kwargs)
    y = kwargs.pop("y", y)
    with pytest.raises(ValueError, match=match):
        token_model().fit(x, y, epochs=1, **kwargs, **FAST)
