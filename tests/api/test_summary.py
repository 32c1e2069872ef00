"""``model.summary()``: the Keras-like table of layers, output shapes and parameter counts."""
import re

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops as F
from support import FAST


def small_cnn():
    return pgo.Sequential([L.Reshape((1, 12, 12)),
                           L.Conv2d(1, 4, 3, name="conv1"), L.ReLU(), L.MaxPool2d(2),
                           L.Conv2d(4, 8, 3, stride=2, padding=1, name="conv2"),
                           L.Flatten(),
                           L.Linear(72, 10, name="head")], input_shape=(144,))


def test_sequential_mlp_table():
    # 784 -> 500 -> 10: 784*500 + 500 = 392,500 and 500*10 + 10 = 5,010 parameters, 397,510 in all;
    # 397,510 float32 = 1,590,040 bytes = 1.52 MiB. Unnamed layers are named by their index.
    model = pgo.Sequential([L.Linear(784, 500), L.ReLU(), L.Linear(500, 10)], input_shape=(784,))
    assert model.summary() == """\
Model: "Sequential"
___________________________________________________________
Layer (type)   Output shape   Param #   Parameters
===========================================================
input          (None, 784)          0
0 (Linear)     (None, 500)    392,500   0.weight (500, 784)
                                        0.bias (500,)
1 (ReLU)       (None, 500)          0
2 (Linear)     (None, 10)       5,010   2.weight (10, 500)
                                        2.bias (10,)
===========================================================
Total params: 397,510 (1.52 MiB)
Trainable params: 397,510
Non-trainable params: 0"""
    assert model.count_params() == 397_510


def test_sequential_cnn_table():
    # flat rows of 144 -> Reshape (1, 12, 12)
    # conv1 3x3, no padding: 12 - 3 + 1 = 10 -> (4, 10, 10); 4*1*3*3 + 4 = 40 parameters
    # MaxPool2d(2): 10 / 2 = 5 -> (4, 5, 5)
    # conv2 3x3, stride 2, padding 1: (5 + 2 - 3) // 2 + 1 = 3 -> (8, 3, 3); 8*4*3*3 + 8 = 296 parameters
    # Flatten: 8*3*3 = 72; head: 72*10 + 10 = 730 parameters
    # total 40 + 296 + 730 = 1,066 float32 = 4,264 bytes = 4.16 KiB
    assert small_cnn().summary() == """\
Model: "Sequential"
________________________________________________________________________
Layer (type)     Output shape        Param #   Parameters
========================================================================
input            (None, 144)               0
0 (Reshape)      (None, 1, 12, 12)         0
conv1 (Conv2d)   (None, 4, 10, 10)        40   conv1.kernel (4, 1, 3, 3)
                                               conv1.bias (4, 1, 1)
2 (ReLU)         (None, 4, 10, 10)         0
3 (MaxPool2d)    (None, 4, 5, 5)           0
conv2 (Conv2d)   (None, 8, 3, 3)         296   conv2.kernel (8, 4, 3, 3)
                                               conv2.bias (8, 1, 1)
5 (Flatten)      (None, 72)                0
head (Linear)    (None, 10)              730   head.weight (10, 72)
                                               head.bias (10,)
========================================================================
Total params: 1,066 (4.16 KiB)
Trainable params: 1,066
Non-trainable params: 0"""


def test_function_model_table():
    # One row per parameter group (the name up to its last "."), with the output of the last op that
    # reads the group: hidden = x W^T + b (before the ReLU): 8*6 + 8 = 56; out (no bias): 3*8 = 24;
    # scale multiplies the outputs: 3. Total 83 float32 = 332 bytes.
    def forward(x, p):
        h = F.relu(F.linear(x, p["hidden.weight"], p["hidden.bias"]))
        return F.mul(F.linear(h, p["out.weight"]), p["scale"])

    model = pgo.FunctionModel(forward, {"hidden.weight": (8, 6), "hidden.bias": (8,), "out.weight": (3, 8),
                                        "scale": (3,)}, input_shape=(6,))
    assert model.summary() == """\
Model: "FunctionModel"
____________________________________________________________
Layer (type)   Output shape   Param #   Parameters
============================================================
input          (None, 6)            0
hidden         (None, 8)           56   hidden.weight (8, 6)
                                        hidden.bias (8,)
out            (None, 3)           24   out.weight (3, 8)
scale          (None, 3)            3   scale (3,)
output         (None, 3)            0
============================================================
Total params: 83 (332 B)
Trainable params: 83
Non-trainable params: 0"""


def test_function_model_rows_follow_the_graph():
    # The rows come in the order the graph uses the groups, not the order they were declared in;
    # a declared parameter the function never reads is listed as unused (and still counted).
    def forward(x, p):
        return F.linear(F.relu(F.linear(x, p["a.weight"])), p["b.weight"])

    model = pgo.FunctionModel(forward, {"b.weight": (2, 5), "spare": (7,), "a.weight": (5, 4)}, input_shape=(4,))
    rows = [line.split()[0] for line in model.summary().splitlines()[4:-4] if not line.startswith(" ")]
    assert rows == ["input", "a", "b", "spare", "output"]
    assert "spare          unused               7   spare (7,)" in model.summary()
    assert "Total params: 37 (148 B)" in model.summary()


def test_function_model_shapes_agree_with_sequential():
    # The same CNN as a FunctionModel: each group's row is the output of its layer (the graph's shapes,
    # batch axis found by building for two batch sizes), as Sequential's layer arithmetic says.
    seq = small_cnn()
    fm = pgo.FunctionModel(seq.forward, seq.param_shapes, input_shape=seq.input_shape)

    def shapes(model):
        rows = [re.split(r" {3,}", line) for line in model.summary().splitlines()[4:-4] if not line.startswith(" ")]
        return {row[0].split()[0]: row[1] for row in rows}

    seq_shapes, fm_shapes = shapes(seq), shapes(fm)
    assert fm_shapes == {"input": "(None, 144)", "conv1": "(None, 4, 10, 10)", "conv2": "(None, 8, 3, 3)",
                         "head": "(None, 10)", "output": "(None, 10)"}
    for name in ("input", "conv1", "conv2", "head"):
        assert fm_shapes[name] == seq_shapes[name]
    assert fm.count_params() == seq.count_params() == 1066


def test_print_fn_and_no_print_by_default(capsys):
    model = small_cnn()
    lines = []
    text = model.summary(print_fn=lines.append)
    assert lines == text.split("\n")
    model.summary()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("make", [
    lambda: pgo.Sequential([L.Linear(4, 2, bias=False)]),
    lambda: pgo.FunctionModel(lambda x, p: F.linear(x, p["w"]), {"w": (2, 4)}),
])
def test_unbuilt_model(make):
    model = make()
    with pytest.raises(ValueError, match="This model has not yet been built: call build"):
        model.summary()
    model.build((4,))
    assert "Total params: 8 (32 B)" in model.summary()


def test_summary_of_a_trained_model_is_unchanged():
    # After fit the weights live in a backend buffer; the table only reads shapes.
    model = pgo.Sequential([L.Linear(4, 3, name="fc"), L.ReLU(), L.Linear(3, 2)], input_shape=(4,))
    before = model.summary()
    x = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    model.fit(x, np.arange(16) % 2, epochs=1, batch_size=8, **FAST)
    assert model.summary() == before
    assert model.predict(x).shape == (16, 2)
