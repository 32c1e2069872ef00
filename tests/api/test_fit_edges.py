"""fit's edges: models without trainable parameters, zero epochs, fitting again, progress output."""
from __future__ import annotations

import inspect
import io
import time

import numpy as np
import pytest
from support import FAST, max_diff, mlp, same_weights

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt.training.progress import Progress


def test_verbose_output(capsys, data):
    x, y = data
    mlp().fit(x[:32], y[:32], epochs=2, batch_size=8, verbose=2, n_threads=1, validation_split=0.25)
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 2 and lines[0].startswith("epoch 1/2") and "loss" in lines[0] and "val_loss" in lines[0]
    assert "acc" in lines[1] and "%" in lines[1]
    # the bar needs a terminal: to anything else (here pytest's capture) verbose=1 writes epoch lines
    mlp().fit(x[:32], y[:32], epochs=2, batch_size=8, verbose=1, n_threads=1)
    out = capsys.readouterr().out
    assert "\r" not in out and "ETA" not in out and [l[:9] for l in out.splitlines()] == ["epoch 1/2", "epoch 2/2"]
    mlp().fit(x[:32], y[:32], epochs=2, batch_size=8, verbose="auto", n_threads=1)  # Keras's name for 1
    assert [l[:9] for l in capsys.readouterr().out.splitlines()] == ["epoch 1/2", "epoch 2/2"]
    mlp().fit(x[:32], y[:32], epochs=1, batch_size=8, verbose=0, n_threads=1)
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="verbose"):
        mlp().fit(x[:32], y[:32], epochs=1, verbose=3, n_threads=1)


def test_progress_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    bar = Progress(1, 3, 4, stream=term)
    logs = {"loss": 0.5, "loss_unc": 0.01, "accuracy": 0.75, "accuracy_unc": 0.02}
    for ib in range(4):
        bar.batch(0, ib, logs, time.perf_counter())
        bar.last = 0.0  # redraw every batch (it throttles to 10 per second)
    bar.epoch(0, {**logs, "time": 1.0})
    out = term.getvalue()
    assert out.count("\repoch 1/3 [") == 4 and "4/4" in out and "ETA" in out and "acc 75.00±2.00%" in out
    assert out.endswith("\n") and "1.00s" in out.splitlines()[-1]


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


def test_model_methods_show_their_arguments():
    """help(model.fit) lists fit's arguments (not **kwargs) with the method's own ``self`` (no
    ``self: 'Network'``), fit's docstring about "this model", and an example."""
    for name in ("fit", "evaluate", "predict", "generate", "save"):
        method = getattr(pgo.Sequential, name)
        sig = inspect.signature(method)
        params = list(sig.parameters)
        assert params[0] == "self" and "kwargs" not in params, (name, params)
        assert sig.parameters["self"].annotation is inspect.Parameter.empty
        assert str(sig).startswith("(self, ")
        doc = method.__doc__
        assert doc.startswith(inspect.cleandoc(getattr(pgo, name).__doc__).split("\n")[0].replace("``model``", "this model"))
        assert "``model``" not in doc and "\nExample::\n\n    " in doc, name
    assert {"epochs", "batch_size", "validation_split", "callbacks", "gather"} <= set(
        inspect.signature(pgo.Sequential.fit).parameters)
