"""Frozen parameters (``Network.freeze`` / ``unfreeze`` / ``frozen``): float32 parameters kept out of
training beside trained ones, as Keras's ``trainable = False``: fit leaves them bit for bit, trains the
others as if the frozen ones were constants, and copies, pickles, files and checkpoints keep the set."""
import copy
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L

FIT = dict(epochs=3, batch_size=16, seed=0, verbose=0, n_threads=1, optimizer=pgo.AdamW(lr=1e-2))


def data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int32)


def mlp():
    return pgo.Sequential([L.Linear(5, 8, name="hidden"), L.ReLU(), L.Linear(8, 2, name="out")], input_shape=(5,))


def test_frozen_parameters_stay_and_the_others_train_as_on_constant_features():
    x, y = data()
    model = mlp()
    model.freeze("hidden")
    assert model.frozen() == {"hidden.weight", "hidden.bias"}
    before = model.get_weights()
    model.fit(x, y, **FIT)
    after = model.get_weights()
    for name in ("hidden.weight", "hidden.bias"):
        np.testing.assert_array_equal(after[name], before[name])
    assert not np.array_equal(after["out.weight"], before["out.weight"])
    # the same steps on the frozen layer's features, computed once: the output layer's training alone
    features = np.maximum(x @ before["hidden.weight"].T + before["hidden.bias"], 0).astype(np.float32)
    head = pgo.Sequential([L.Linear(8, 2, name="out")], input_shape=(8,))
    head.set_weights({"out.weight": before["out.weight"], "out.bias": before["out.bias"]})
    head.fit(features, y, **FIT)
    # float32 features from numpy and from ggml's forward pass differ in rounding only (~1e-7 relative);
    # three epochs of AdamW at lr 1e-2 carry that to ~1e-6 of the weights
    for name, value in head.get_weights().items():
        np.testing.assert_allclose(after[name], value, rtol=1e-4, atol=1e-5)


def test_unfreeze_trains_them_again_and_names_are_checked():
    x, y = data()
    model = mlp()
    model.freeze()
    assert model.frozen() == set(model.param_shapes)
    with pytest.raises(ValueError, match="no trainable parameters"):
        model.fit(x, y, **FIT)
    model.unfreeze("hidden.bias")
    assert model.frozen() == {"hidden.weight", "out.weight", "out.bias"}
    before = model.get_weights()
    model.fit(x, y, **FIT)
    after = model.get_weights()
    assert not np.array_equal(after["hidden.bias"], before["hidden.bias"])
    np.testing.assert_array_equal(after["out.weight"], before["out.weight"])
    with pytest.raises(ValueError, match="'hid' names no parameter"):
        model.freeze("hid")  # a prefix counts only up to a dot: a typo is no silent no-op
    with pytest.raises(TypeError, match="must be str"):
        model.freeze(0)
    with pytest.raises(ValueError, match="not built"):
        pgo.Sequential([L.Linear(5, 2)]).freeze()


def test_summary_counts_frozen_parameters_as_non_trainable():
    model = mlp()
    model.freeze("out")
    text = model.summary()
    assert "Trainable params: 48" in text          # hidden: 5 * 8 + 8
    assert "Non-trainable params: 18" in text      # out: 8 * 2 + 2


def test_copies_pickles_files_and_checkpoints_keep_the_frozen_set(tmp_path):
    x, y = data()
    model = mlp()
    model.freeze("hidden.weight")
    for other in (copy.copy(model), copy.deepcopy(model), model.clone(), pickle.loads(pickle.dumps(model))):
        assert other.frozen() == {"hidden.weight"}
    model.save(tmp_path / "m.gguf")
    assert pgo.load(tmp_path / "m.gguf").frozen() == {"hidden.weight"}
    # a checkpoint written during a fit with a frozen parameter resumes into the same model
    kw = dict(batch_size=16, seed=0, verbose=0, n_threads=1, validation_split=0.25)

    def frozen_mlp():
        m = mlp()
        m.freeze("hidden.weight")
        return m

    straight = frozen_mlp()
    straight.fit(x, y, epochs=3, optimizer=pgo.AdamW(lr=1e-2), **kw)
    frozen_mlp().fit(x, y, epochs=2, optimizer=pgo.AdamW(lr=1e-2), **kw,
                     callbacks=[pgo.ModelCheckpoint(tmp_path / "ckpt-{epoch}.gguf")])
    resumed = frozen_mlp()
    resumed.fit(x, y, epochs=3, optimizer=pgo.AdamW(lr=1e-2), resume_from=tmp_path / "ckpt-2.gguf", **kw)
    for name, value in straight.get_weights().items():
        np.testing.assert_array_equal(resumed.get_weights()[name], value)


def test_a_file_whose_frozen_list_names_no_parameter_is_a_value_error(tmp_path):
    model = mlp()
    model.freeze("hidden.weight")
    model.save(tmp_path / "m.gguf")
    raw = (tmp_path / "m.gguf").read_bytes()
    assert raw.count(b'["hidden.weight"]') == 1
    (tmp_path / "bad.gguf").write_bytes(raw.replace(b'["hidden.weight"]', b'["hidden.wxight"]'))
    with pytest.raises(ValueError, match="corrupt pyggml_opt.frozen .*'hidden.wxight' names no parameter"):
        pgo.load(tmp_path / "bad.gguf")
    with pytest.raises(ValueError, match="extra key 'pyggml_opt.frozen' is one save writes itself"):
        mlp().save(tmp_path / "x.gguf", extra={"pyggml_opt.frozen": "[]"})
