"""Learning-rate schedules (values against their formulas, and as fit's ``lr``), and RMSNorm against
float64 numpy (forward) and central finite differences of the loss (gradients)."""
import math
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, X, Y, check_gradients, mlp


def test_warmup_cosine_values():
    s = pgo.WarmupCosine(1e-3, total_steps=110, warmup_steps=10, min_lr=1e-5)
    assert [s(i) for i in (0, 4, 9)] == pytest.approx([1e-4, 5e-4, 1e-3])        # linear warm-up
    assert s(10) == pytest.approx(1e-3)                                               # cosine starts at lr
    assert s(60) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))                         # half-way
    assert s(110) == pytest.approx(1e-5) and s(500) == pytest.approx(1e-5)           # min_lr after the end
    assert pgo.WarmupCosine(1.0, total_steps=4)(4) == 1e-12                           # never 0 (ggml-opt refuses it)
    with pytest.raises(ValueError, match="warmup_steps .10. must be below total_steps .10."):
        pgo.WarmupCosine(1e-3, total_steps=10, warmup_steps=10)


def test_step_and_exponential_decay_values():
    step = pgo.StepDecay(0.1, step_size=3, gamma=0.5)
    assert [step(i) for i in range(7)] == pytest.approx([0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025])
    exp = pgo.ExponentialDecay(0.1, gamma=0.9)
    assert [exp(i) for i in range(3)] == pytest.approx([0.1, 0.09, 0.081]) and exp(10**6) == 1e-12
    with pytest.raises(ValueError, match="gamma"):
        pgo.ExponentialDecay(0.1, gamma=1.5)


def test_a_schedule_drives_fit_and_pickles():
    sched = pgo.WarmupCosine(1e-2, total_steps=8, warmup_steps=2)
    m = mlp()
    h = m.fit(X, Y, epochs=2, batch_size=8, optimizer=pgo.AdamW(lr=sched), **FAST)  # 4 steps per epoch
    # History's lr is the rate of the last step of each epoch: steps 3 and 7
    assert h["lr"] == pytest.approx([sched(3), sched(7)])
    again = pickle.loads(pickle.dumps(sched))
    assert [again(i) for i in range(10)] == [sched(i) for i in range(10)] and "WarmupCosine(lr=0.01" in repr(again)


def rms_model(affine=True, seed=0):
    m = pgo.Sequential([L.Linear(6, 5), L.RMSNorm(5, eps=1e-5, elementwise_affine=affine), L.Linear(5, 3)])
    m.build((6,), seed=seed)
    if affine:
        m.set_weights({"1.weight": np.linspace(0.5, 1.5, 5)})
    return m


def numpy_forward(w, x, eps=1e-5, affine=True):
    h = x.astype(np.float64) @ w["0.weight"].T + w["0.bias"]
    h = h / np.sqrt((h ** 2).mean(axis=1, keepdims=True) + eps)
    if affine:
        h = h * w["1.weight"]
    return h @ w["2.weight"].T + w["2.bias"]


@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_forward_matches_numpy(affine):
    m = rms_model(affine)
    np.testing.assert_allclose(m.predict(X, logits=True), numpy_forward(m.get_weights(), X, affine=affine),
                               rtol=0, atol=2e-6)


def test_rms_norm_gradients_match_finite_differences():
    m = rms_model()
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    lr = 1.0
    m.fit(X, Y, epochs=1, batch_size=len(X), shuffle=False, optimizer=pgo.SGD(lr=lr), **FAST)
    got = {k: (w0[k] - v) / lr for k, v in m.get_weights().items()}  # the gradient of one full-batch step

    def loss(w):
        z = numpy_forward(w, X)
        z = z - z.max(axis=1, keepdims=True)
        return float(-(z[np.arange(len(Y)), Y] - np.log(np.exp(z).sum(axis=1))).mean())

    # float64 differences of a float64 loss: truncation ~eps^2; the step's float32 weights carry ~1e-7
    check_gradients(loss, w0, got, ("0.weight", "1.weight", "0.bias"), eps=1e-5, tol=2e-6)


def test_rms_norm_checks_and_saves(tmp_path):
    with pytest.raises(ValueError, match="last axis of size 4"):
        pgo.Sequential([L.RMSNorm(4)]).build((5,))
    m = rms_model()
    m.save(tmp_path / "rms.gguf")
    np.testing.assert_array_equal(pgo.load(tmp_path / "rms.gguf").predict(X), m.predict(X))
    assert not math.isnan(m.evaluate(X, Y)[0])
