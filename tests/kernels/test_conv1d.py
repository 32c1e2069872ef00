"""Conv1d and GlobalAveragePooling2D against a float64 numpy convolution (forward, several strides / paddings / dilations) and
central finite differences of the loss (the gradients of two stacked convolutions: the first one's
reach it through CONV_2D_BACK_INPUT)."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, check_gradients


def conv1d_numpy(x, w, b, stride, padding, dilation):
    n, c, length = x.shape
    o, _, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    out_len = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, out_len))
    for t in range(out_len):
        window = xp[:, :, t * stride: t * stride + dilation * (k - 1) + 1: dilation]   # (n, c, k)
        out[:, :, t] = np.einsum("nck,ock->no", window, w)
    return out + b.reshape(1, o, 1)


@pytest.mark.parametrize("stride, padding, dilation", [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 0, 2)])
def test_forward_matches_numpy(stride, padding, dilation):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3, 17)).astype(np.float32)
    m = pgo.Sequential([L.Conv1d(3, 4, 3, stride=stride, padding=padding, dilation=dilation), L.Flatten()])
    m.build((3, 17), seed=1)
    w = m.get_weights()
    assert w["0.kernel"].shape == (4, 3, 3) and w["0.bias"].shape == (4, 1)
    want = conv1d_numpy(x.astype(np.float64), w["0.kernel"], w["0.bias"], stride, padding, dilation)
    assert m.output_shape == (want.shape[1] * want.shape[2],)
    np.testing.assert_allclose(m.predict(x, logits=True), want.reshape(5, -1), rtol=0, atol=2e-6)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 2, 12)).astype(np.float32)
    y = rng.integers(0, 3, 6)
    m = pgo.Sequential([L.Conv1d(2, 3, 3, padding=1), L.ReLU(), L.Conv1d(3, 2, 3, stride=2, dilation=2),
                        L.Flatten(), L.Linear(2 * 4, 3)])
    m.build((2, 12), seed=3)
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    m.fit(x, y, epochs=1, batch_size=6, shuffle=False, optimizer=pgo.SGD(lr=1.0), **FAST)
    got = {k: w0[k] - v for k, v in m.get_weights().items()}   # one full-batch step of lr 1: the gradient

    def loss(w):
        h = np.maximum(conv1d_numpy(x.astype(np.float64), w["0.kernel"], w["0.bias"], 1, 1, 1), 0)
        h = conv1d_numpy(h, w["2.kernel"], w["2.bias"], 2, 0, 2).reshape(6, -1)
        z = h @ w["4.weight"].T + w["4.bias"]
        z = z - z.max(axis=1, keepdims=True)
        return float(-(z[np.arange(6), y] - np.log(np.exp(z).sum(axis=1))).mean())

    check_gradients(loss, w0, got, ("0.kernel", "0.bias", "2.kernel"), eps=1e-6, tol=2e-6)


def test_checks_and_saving(tmp_path):
    with pytest.raises(ValueError, match=r"\(channels=3, length\)"):
        pgo.Sequential([L.Conv1d(3, 4, 3)]).build((2, 10))
    with pytest.raises(ValueError, match="kernel"):
        pgo.Sequential([L.Conv1d(3, 4, 5), L.Flatten()]).build((3, 4))
    m = pgo.Sequential([L.Conv1d(2, 2, 3), L.Flatten()], input_shape=(2, 8))
    m.save(tmp_path / "c.gguf")
    back = pgo.load(tmp_path / "c.gguf")
    x = np.random.default_rng(0).normal(size=(3, 2, 8)).astype(np.float32)
    np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))
    assert repr(back.layers[0]) == "Conv1d(in_channels=2, out_channels=2, kernel_size=3, stride=1, padding=0, " \
                                   "dilation=1, bias=True)"


def test_global_average_pooling_2d_matches_numpy_and_trains():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 2, 5, 6)).astype(np.float32)
    y = rng.integers(0, 2, 8)
    m = pgo.Sequential([L.Conv2d(2, 3, 3, padding=1), L.GlobalAveragePooling2D(), L.Linear(3, 2)])
    m.build((2, 5, 6), seed=0)
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    assert m.output_shape == (2,)

    def logits(w):
        h = np.zeros((8, 3, 5, 6))
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        for i in range(5):
            for j in range(6):
                h[:, :, i, j] = np.einsum("ncab,ocab->no", xp[:, :, i:i + 3, j:j + 3], w["0.kernel"])
        h = h + w["0.bias"].reshape(1, 3, 1, 1)
        return h.mean(axis=(2, 3)) @ w["2.weight"].T + w["2.bias"]

    np.testing.assert_allclose(m.predict(x, logits=True), logits(w0), rtol=0, atol=2e-6)
    m.fit(x, y, epochs=1, batch_size=8, shuffle=False, optimizer=pgo.SGD(lr=1.0), **FAST)
    got = {k: w0[k] - v for k, v in m.get_weights().items()}

    def loss(w):
        z = logits(w)
        z = z - z.max(axis=1, keepdims=True)
        return float(-(z[np.arange(8), y] - np.log(np.exp(z).sum(axis=1))).mean())

    check_gradients(loss, w0, got, ("0.kernel", "0.bias"), eps=1e-6, tol=2e-6)
