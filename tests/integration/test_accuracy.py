"""Accuracy targets on the real Fashion-MNIST test set (10000 images) after training with ggml's
examples/mnist hyperparameters: 30 epochs, logical batch 1000, physical batch 500, 5 % validation
split, AdamW with lr 1e-3, seed 0.

Targets (issue 3): MLP (ggml's mnist-fc) >= 88.0 % (ggml's C++ mnist-train: 88.6 %), CNN (mnist-cnn)
>= 86 % (ggml's C++: 86.6 %). In two runs of the README's test command on 2 shared cores (AMD EPYC,
Zen 4; nearly idle, then beside other work) the MLP took 22 and 46 s, the CNN 68 s and 2 min 10 s:
it is marked ``slow`` (runs by default; ``pytest -m "not slow"`` leaves it out).

Needs Debian's ``dataset-fashion-mnist``: skips without it, or fails when
``PYGGML_OPT_REQUIRE_C_TESTS=1`` (CI, where it is installed).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import data

REQUIRE = os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1"
EPOCHS = 30


@pytest.fixture(scope="module")
def fashion():
    if not data.fashion_mnist_available():
        reason = "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
        if REQUIRE:
            pytest.fail(f"{reason} (PYGGML_OPT_REQUIRE_C_TESTS=1)")
        pytest.skip(reason)
    return data.load_fashion_mnist(flatten=True)


def train_and_test(model, fashion):
    (x, y), (xt, yt) = fashion
    t0 = time.perf_counter()
    history = model.fit(x, y, epochs=EPOCHS, batch_size=1000, physical_batch_size=500,
                        validation_split=0.05, optimizer=pgo.AdamW(lr=1e-3), seed=0, verbose=0)
    elapsed = time.perf_counter() - t0
    loss, acc = model.evaluate(xt, yt)
    assert len(history["loss"]) == EPOCHS
    assert np.isfinite(history["loss"]).all() and np.isfinite(history["val_loss"]).all()
    # training made progress: the last epoch is better than the first
    assert history["loss"][-1] < history["loss"][0]
    assert history["val_accuracy"][-1] > history["val_accuracy"][0]
    print(f"\n{type(model).__name__}: test accuracy {100 * acc:.2f} %, test loss {loss:.4f}, "
          f"train accuracy {100 * history['accuracy'][-1]:.2f} %, val accuracy "
          f"{100 * history['val_accuracy'][-1]:.2f} %, {elapsed / EPOCHS:.2f} s/epoch "
          f"(median {np.median(history['time']):.2f} s)")
    return loss, acc


def test_mlp_reaches_88_percent_on_fashion_mnist(fashion):
    loss, acc = train_and_test(pgo.models.mnist_fc(), fashion)
    assert acc >= 0.880, f"MLP test accuracy {100 * acc:.2f} % < 88.0 %"
    assert loss < 0.40


@pytest.mark.slow
def test_cnn_reaches_86_percent_on_fashion_mnist(fashion):
    loss, acc = train_and_test(pgo.models.mnist_cnn(), fashion)
    assert acc >= 0.86, f"CNN test accuracy {100 * acc:.2f} % < 86 %"
    assert loss < 0.45
