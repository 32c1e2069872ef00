"""predict and evaluate: any number of samples, logits, consistency with training metrics."""
from __future__ import annotations

import math
import signal

import numpy as np
import pytest
from support import FAST, blobs, mlp

import pyggml_opt as pgo


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


# An interrupt that lands while a finalizer frees a graph is printed and ignored by Python itself
# ("Exception ignored in: <finalize object>"); pytest reports that as a warning.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_predict_survives_interrupts_at_any_point(trained, data):
    """Ctrl+C may land anywhere inside predict, between ggml-opt's alloc and eval too: the
    KeyboardInterrupt reaches the caller and the next predict works (never a ggml abort)."""
    x = np.repeat(data[0], 40, axis=0)  # 9600 samples: ~40 batches, each its own graph
    ref = trained.predict(x[:50])

    armed = [False]  # a timer that fires after predict returned must not interrupt the test itself

    def interrupt(signum, frame):
        if armed[0]:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    interrupted = 0
    try:
        for delay in np.linspace(1e-4, 5e-3, 30):
            armed[0] = True
            signal.setitimer(signal.ITIMER_REAL, float(delay))
            try:
                trained.predict(x, batch_size=256)
                armed[0] = False
            except KeyboardInterrupt:
                interrupted += 1
            finally:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert interrupted > 0
    np.testing.assert_array_equal(trained.predict(x[:50]), ref)
