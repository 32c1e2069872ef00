"""GGUF save / load of every model kind, get_weights / set_weights."""
from __future__ import annotations

import json

import numpy as np
import pytest
from support import FAST, X, Y, mlp, same_weights

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt.core import GGUFFile
from pyggml_opt.nn import serialize


def assert_roundtrip(model, x, path):
    model.save(path)
    loaded = pgo.load(path)
    assert type(loaded) is type(model)
    assert loaded.input_shape == model.input_shape and loaded.output_shape == model.output_shape
    assert same_weights(loaded.get_weights(), model.get_weights())
    assert loaded.loss == model.loss
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    return loaded


def test_save_load_sequential_with_every_layer(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 64)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    model = pgo.Sequential([
        L.Reshape((1, 8, 8)), L.Conv2d(1, 4, 3, padding=1, name="c1"), L.GELU(), L.MaxPool2d(2),
        L.Conv2d(4, 4, (3, 2), stride=(1, 1), dilation=1), L.Tanh(), L.AvgPool2d(2, stride=1), L.Flatten(),
        L.LayerNorm(8), L.Linear(8, 6), L.Sigmoid(), L.SiLU(), L.Linear(6, 5, bias=False), L.ReLU(),
        L.Linear(5, 3, name="head"),
    ])
    model.fit(x, y, epochs=2, batch_size=8, **FAST)
    loaded = assert_roundtrip(model, x, tmp_path / "seq.gguf")
    assert repr(loaded) == repr(model)
    assert serialize(loaded) == serialize(model)
    assert "c1.kernel" in loaded.get_weights() and "head.bias" in loaded.get_weights()
    with GGUFFile.read(tmp_path / "seq.gguf") as f:
        assert f.get("general.architecture") == "pyggml_opt"
        assert json.loads(f.get("pyggml_opt.config")) == serialize(model)
    # the loaded model keeps training
    loaded.fit(x, y, epochs=1, batch_size=8, **FAST)


def test_save_load_regression_and_untrained(tmp_path):
    m = pgo.Sequential([L.Linear(3, 2)], input_shape=(3,))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    loaded = assert_roundtrip(m, x, tmp_path / "untrained.gguf")
    assert loaded.loss is None
    m.fit(x, x[:, :2], loss="mse", epochs=1, batch_size=5, **FAST)
    loaded = assert_roundtrip(m, x, tmp_path / "mse.gguf")
    assert loaded.loss == "mse"


def test_save_load_mnist_fc(tmp_path):
    m = pgo.models.mnist_fc()
    m.loss = "cross_entropy"
    x = np.random.default_rng(0).uniform(size=(6, 784)).astype(np.float32)
    assert_roundtrip(m, x, tmp_path / "fc.gguf")
    with GGUFFile.read(tmp_path / "fc.gguf") as f:
        assert f.get("general.architecture") == "mnist-fc"
        assert sorted(f.tensor_names()) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
        assert f.tensor("fc1.weight").shape == (500, 784)


def test_save_load_mnist_cnn_dense_permutation(tmp_path):
    m = pgo.models.mnist_cnn()
    x = np.random.default_rng(0).uniform(size=(3, 784)).astype(np.float32)
    y = np.array([1, 2, 3])
    m.fit(x, y, epochs=1, batch_size=3, **FAST)
    loaded = assert_roundtrip(m, x, tmp_path / "cnn.gguf")
    assert loaded.layers[1].name == "conv1"
    w = m.get_weights()["dense.weight"]  # columns in pyggml_opt's Flatten order (channel, h, w)
    with GGUFFile.read(tmp_path / "cnn.gguf") as f:
        assert f.get("general.architecture") == "mnist-cnn"
        assert sorted(f.tensor_names()) == ["conv1.bias", "conv1.kernel", "conv2.bias", "conv2.kernel",
                                            "dense.bias", "dense.weight"]
        stored = f.tensor("dense.weight", 2)  # columns in ggml's order (h, w, channel)
    assert stored.shape == w.shape == (10, 7 * 7 * 16)
    assert not np.array_equal(stored, w)
    for c, i, j in [(0, 0, 1), (5, 3, 2), (15, 6, 6), (7, 0, 0)]:
        np.testing.assert_array_equal(stored[:, (i * 7 + j) * 16 + c], w[:, c * 49 + i * 7 + j])
    np.testing.assert_array_equal(pgo.saving.load_weights(tmp_path / "cnn.gguf", m)["dense.weight"], w)


def test_function_model_weights_roundtrip(tmp_path, data):
    x, y = data
    f = lambda x, p: ops.linear(ops.tanh(ops.linear(x, p["a"])), p["b"])  # noqa: E731
    m = pgo.FunctionModel(f, {"a": (8, 6), "b": (3, 8)})
    m.fit(x, y, epochs=1, batch_size=16, **FAST)
    m.save(tmp_path / "fm.gguf")
    with pytest.raises(ValueError, match="FunctionModel"):
        pgo.load(tmp_path / "fm.gguf")
    m2 = pgo.FunctionModel(f, {"a": (8, 6), "b": (3, 8)}, input_shape=(6,))
    m2.set_weights(pgo.saving.load_weights(tmp_path / "fm.gguf", m2))
    m2.loss = m.loss
    np.testing.assert_array_equal(m2.predict(x), m.predict(x))


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        pgo.load(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError):
        pgo.load(tmp_path / "junk.gguf")
    for arch, message in (("mamba", "unknown architecture"), ("llama", "needs the number llama.context_length")):
        with GGUFFile() as f:
            f.set("general.architecture", arch)
            f.write(tmp_path / f"{arch}.gguf")
        with pytest.raises(ValueError, match=message):
            pgo.load(tmp_path / f"{arch}.gguf")
    with pytest.raises(TypeError, match="model"):
        pgo.save("not a model", tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).save(tmp_path / "x.gguf")



# ---- weights ---------------------------------------------------------------------------------------------
def test_get_set_weights_roundtrip(data):
    x, y = data
    a = mlp()
    a.fit(x, y, epochs=1, batch_size=16, **FAST)
    w = a.get_weights()
    assert set(w) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert w["0.weight"].shape == (16, 6) and w["0.weight"].dtype == np.float32
    w["0.weight"][:] = 0  # a copy: the model is unchanged
    assert not np.array_equal(a.get_weights()["0.weight"], w["0.weight"])
    b = mlp(seed=99)
    b.set_weights(a.get_weights())
    assert same_weights(a.get_weights(), b.get_weights())
    b.loss = a.loss
    np.testing.assert_array_equal(b.predict(x[:9]), a.predict(x[:9]))
    # partial update, float64 converted
    b.set_weights({"2.bias": np.array([1.0, 2.0, 3.0])})
    np.testing.assert_array_equal(b.get_weights()["2.bias"], np.array([1, 2, 3], np.float32))
    assert np.array_equal(b.get_weights()["0.weight"], a.get_weights()["0.weight"])
    # before the first run the weights live in numpy; same behaviour
    c = mlp()
    c.set_weights(a.get_weights())
    assert same_weights(c.get_weights(), a.get_weights())
    assert a.count_params() == 16 * 6 + 16 + 3 * 16 + 3
    assert "0.weight" in a.summary()


def test_set_weights_errors():
    m = mlp()
    with pytest.raises(ValueError, match="unknown parameter 'nope'"):
        m.set_weights({"nope": np.zeros(3)})
    with pytest.raises(ValueError, match=r"'0.bias'.*shape"):
        m.set_weights({"0.bias": np.zeros(15)})
    with pytest.raises(ValueError, match="NaN"):
        m.set_weights({"0.bias": np.full(16, np.nan)})
    with pytest.raises(TypeError, match="dict"):
        m.set_weights([np.zeros(16)])
    with pytest.raises(TypeError, match="'0.bias'"):
        m.set_weights({"0.bias": np.array(["a"] * 16)})
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).get_weights()
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).set_weights({})
    with pytest.raises(ValueError, match="not built"):
        mlp(build=False).predict(np.zeros((2, 6)))


def test_names_and_sizes_ggml_cannot_store_are_value_errors(tmp_path):
    """ggml keeps at most 63 bytes of a tensor name and gguf aborts on duplicate names: too long a
    parameter name is refused when the model is built, and a checkpoint, which prefixes its optimizer
    tensors, refuses names that would not fit there; a model of any size saves (one tensor context
    per tensor written)."""
    with pytest.raises(ValueError, match="too long for ggml's tensor names"):
        pgo.Sequential([L.Linear(3, 2, name="b" * 60)]).build((3,))
    m = pgo.Sequential([L.Linear(3, 2, name="c" * 45)], input_shape=(3,))  # "ccc...c.weight": 52 bytes
    m.save(tmp_path / "ok.gguf")
    with pytest.raises(ValueError, match=r"too long for ggml's tensor names \(at most 51 bytes here\)"):
        m.fit(X[:, :3], Y % 2, epochs=1, batch_size=8, callbacks=[pgo.ModelCheckpoint(tmp_path / "ck.gguf")], **FAST)
    assert not (tmp_path / "ck.gguf").exists()
    big = pgo.Sequential([L.Linear(4, 4) for _ in range(150)], input_shape=(4,))  # 300 tensors
    big.save(tmp_path / "big.gguf")
    assert same_weights(pgo.load(tmp_path / "big.gguf").get_weights(), big.get_weights())
    with GGUFFile() as f:
        f.add_tensor("t", np.zeros(2))
        with pytest.raises(ValueError, match="already has a tensor 't'"):
            f.add_tensor("t", np.zeros(2))
        with pytest.raises(ValueError, match="too long"):
            f.add_tensor("x" * 64, np.zeros(2))


def test_files_of_the_previous_config_layout_still_load(tmp_path):
    """Files written before layers were registered by name ({"type": "Sequential", "layers": [{"class",
    "name", "config"}]}, pyggml_opt 0.1 up to session 4) load as they did."""
    old = {"type": "Sequential", "layers": [
        {"class": "Linear", "name": "fc", "config": {"in_features": 4, "out_features": 3, "bias": True}},
        {"class": "ReLU", "name": None, "config": {}}]}
    w = {"fc.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "fc.bias": np.ones(3, np.float32)}
    with GGUFFile() as f:
        for k, v in {"general.architecture": "pyggml_opt", "pyggml_opt.config": json.dumps(old),
                     "pyggml_opt.input_shape": "[4]", "pyggml_opt.loss": "mse"}.items():
            f.set(k, v)
        for k, v in w.items():
            f.add_tensor(k, v)
        f.write(tmp_path / "old.gguf")
    m = pgo.load(tmp_path / "old.gguf")
    assert [type(layer).__name__ for layer in m.layers] == ["Linear", "ReLU"] and m.layer_names == ["fc", "1"]
    assert m.loss == "mse" and same_weights(m.get_weights(), w)
    np.testing.assert_array_equal(m.predict(np.ones((1, 4)), logits=True), [[7.0, 23.0, 39.0]])


def test_gguf_keys_keep_numpy_types_and_arrays(tmp_path):
    """What llama.cpp's keys need: exact scalar types (it refuses a uint32 key stored as int64) and
    arrays of strings and numbers, read back as written."""
    with GGUFFile() as f:
        f.set("u32", np.uint32(4_000_000_000))
        f.set("f32", np.float32(1e-5))
        f.set("i64", 7)
        f.set("flag", False)
        f.set("words", ["a", "é▁", " "])
        f.set("none", [])
        f.set("i32s", np.array([1, -3], np.int32))
        f.set("f32s", np.array([0.5, 2.0], np.float32))
        f.write(tmp_path / "k.gguf")
        with pytest.raises(ValueError, match="NUL"):
            f.set("bad", ["a\x00b"])
        with pytest.raises(ValueError, match="UTF-8"):
            f.set("bad", "\udc80")
        with pytest.raises(TypeError, match="'bad' is dict"):
            f.set("bad", {})
        with pytest.raises(TypeError, match="'bad' is ndarray"):
            f.set("bad", np.zeros((2, 2), np.float32))
    with GGUFFile.read(tmp_path / "k.gguf") as f:
        assert f.get("u32") == 4_000_000_000 and f.get("f32") == np.float32(1e-5) and f.get("i64") == 7
        assert f.get("flag") is False
        assert f.get_array("words") == ["a", "é▁", " "] and f.get_array("none") == []
        i32s, f32s = f.get_array("i32s"), f.get_array("f32s")
        assert isinstance(i32s, np.ndarray) and i32s.dtype == np.int32 and i32s.tolist() == [1, -3]
        assert isinstance(f32s, np.ndarray) and f32s.dtype == np.float32 and f32s.tolist() == [0.5, 2.0]
        assert f.get_array("absent") is None
        with pytest.raises(ValueError, match="not an array"):
            f.get_array("u32")
        with pytest.raises(ValueError, match="not read"):
            f.get("words")
