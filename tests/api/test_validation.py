"""Every bad argument of fit / predict / evaluate, layers, models and optimizers is a ValueError or
TypeError naming it, and leaves the model usable."""
from __future__ import annotations

import numpy as np
import pytest
from support import FAST, X, Y, mlp, same_weights

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops


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
    (dict(validation_split=1.0), ValueError, r"validation_split must be in \[0.0, 1.0\)"),
    (dict(validation_split=-0.1), ValueError, r"validation_split must be in \[0.0, 1.0\)"),
    (dict(validation_split="0.1"), TypeError, "validation_split must be a number"),
    (dict(validation_split=0.2, validation_data=(X, Y)), ValueError, "validation_split or validation_data"),
    (dict(validation_data=(X[:, :5], Y)), ValueError, r"validation_data\[0\] has samples of shape"),
    (dict(validation_data=(X, Y[:3])), ValueError, "different lengths"),
    (dict(validation_data=(X,)), ValueError, "validation_data must be a pair"),
    (dict(epochs=-1), ValueError, "epochs must be an int >= 0"),
    (dict(verbose=3), ValueError, r"verbose must be an int in \[0, 2\]"),
    (dict(seed=-1), ValueError, "seed must be an int >= 0"),
    (dict(n_threads=0), ValueError, "n_threads must be an int in \\[1, "),
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
