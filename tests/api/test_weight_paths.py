"""Every path that puts weights into a model checks them exactly, and a file's architecture is
compared with the model's before anything is written (issue: nothing lost, nothing hangs).

- pickle / copy / clone of a model with a custom layer whose ``get_config`` misses a constructor
  argument used to rebuild the layer at its default size and copy the smaller weight into the larger
  tensor (the rest uninitialised memory): now refused when pickling, saving and unpickling;
- ``fit(resume_from=...)`` with a checkpoint of another architecture whose tensors happen to fit used to
  train on silently;
- ``pgo.load`` of a file whose configuration was edited to huge sizes used to allocate them first;
- ``CharTokenizer`` mapped bytes to the unknown id silently.
"""
import copy
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import Backend, GGUFFile, tensor_data
from pyggml_opt.data import CharTokenizer
from pyggml_opt.nn import ParamStore, register
from pyggml_opt.nn.layers import Layer, LayerShapes

from support import FAST, X


@register
class ScaleNoConfig(Layer):
    """A custom layer whose constructor argument ``n`` is not in its configuration (Layer.get_config
    returns only the name): rebuilt from the configuration, it has n=4 whatever it had."""

    def __init__(self, n: int = 4, name: str | None = None) -> None:
        super().__init__(name)
        self.n = n

    def infer(self, input_shape):
        return LayerShapes(input_shape, {"w": (self.n,)})

    def init(self, pname, shape, rng):
        return np.arange(1, self.n + 1, dtype=np.float32)

    def forward(self, x, params):
        return x * params["w"]


@register
class ScaleWithConfig(ScaleNoConfig):
    """The same layer done right: its configuration holds ``n``."""

    def get_config(self) -> dict:
        return {**super().get_config(), "n": self.n}


def scaled(layer_cls, n=6):
    m = pgo.Sequential([layer_cls(n), pgo.layers.Linear(n, 3)])
    return m.build((n,), seed=0)


@pytest.mark.parametrize("copier", [pickle.dumps, copy.deepcopy, copy.copy, lambda m: m.clone()],
                         ids=["pickle", "deepcopy", "copy", "clone"])
def test_a_layer_whose_config_misses_its_size_is_refused_by_every_copy(copier):
    m = scaled(ScaleNoConfig)
    with pytest.raises(ValueError, match=r"get_config\(\).*constructor's arguments"):
        copier(m)
    # the model itself is untouched and still usable
    np.testing.assert_array_equal(m.get_weights()["0.w"], np.arange(1, 7, dtype=np.float32))
    assert m.predict(X[:2]).shape == (2, 3)


def test_a_layer_whose_config_misses_its_size_is_refused_by_save(tmp_path):
    m = scaled(ScaleNoConfig)
    with pytest.raises(ValueError, match="differs from this one in 1 parameter"):
        m.save(tmp_path / "m.gguf")
    assert not os.listdir(tmp_path)  # nothing written, not even a temporary file


def test_a_complete_config_copies_exactly(tmp_path):
    m = scaled(ScaleWithConfig)
    x = X[:5]
    want = m.predict(x)
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), m.clone()):
        np.testing.assert_array_equal(other.predict(x), want)
    m.save(tmp_path / "m.gguf")
    np.testing.assert_array_equal(pgo.load(tmp_path / "m.gguf").predict(x), want)


def test_unpickling_weights_that_do_not_fit_is_refused():
    # a pickle written before these checks (or edited): the weights of a 6-wide layer, the config of a 4-wide one
    m = scaled(ScaleWithConfig)
    rebuild, args = m.__reduce__()
    cls, config, input_shape, weights, *rest = args
    weights = {**weights, "0.w": weights["0.w"][:4]}
    with pytest.raises(ValueError, match=r"parameter '0.w': expected shape \(6,\), got \(4,\)"):
        rebuild(cls, config, input_shape, weights, *rest)
    with pytest.raises(ValueError, match="the weights given are"):
        rebuild(cls, config, input_shape, {k: v for k, v in weights.items() if k != "0.w"}, *rest)


def test_a_tensor_is_written_whole_or_not_at_all():
    with Backend("cpu", 1) as backend:
        store = ParamStore({"w": (2, 3)}, backend)
        store.fill({"w": np.ones((2, 3), np.float32)})
        for wrong in (np.zeros(3, np.float32), np.zeros((2, 4), np.float32)):
            with pytest.raises(ValueError, match=r"does not fill a tensor of shape \(2, 3\)"):
                tensor_data.set(store.tensors["w"].ptr, wrong)
        np.testing.assert_array_equal(store.get()["w"], np.ones((2, 3), np.float32))
        store.close()


def _gpt(**kw):
    args = dict(vocab_size=11, context=8, dim=16, n_layers=2, n_heads=2)
    args.update(kw)
    return pgo.models.gpt(**args)


def _tokens(n=24, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 11, size=(n, 9)).astype(np.int32)
    return ids[:, :-1], ids[:, 1:]


@pytest.mark.parametrize("other,differs", [
    (dict(n_layers=1), "layers"),
    (dict(n_heads=4), "n_heads"),
    (dict(positions="rope"), "positions"),  # the argument itself, a language model carrying its arguments
], ids=["1-layer-from-2-layer", "4-heads-from-2-heads", "rope-from-learned"])
def test_resuming_another_architecture_is_refused_before_any_change(tmp_path, other, differs):
    x, y = _tokens()
    kw = dict(batch_size=8, epochs=1, **FAST)
    _gpt().fit(x, y, callbacks=[pgo.ModelCheckpoint(tmp_path / "ckpt.gguf")], **kw)
    target = _gpt(**other)
    w0 = target.get_weights()
    # the target's own tensors are all in the checkpoint, with the same shapes: only the architecture tells
    with GGUFFile.read(tmp_path / "ckpt.gguf") as f:
        assert all(f.tensor(n, len(s)).shape == s for n, s in target.param_shapes.items())
    with pytest.raises(ValueError, match=f"another architecture: .*{differs}"):
        target.fit(x, y, resume_from=tmp_path / "ckpt.gguf", **{**kw, "epochs": 2})
    assert all(np.array_equal(w0[k], v) for k, v in target.get_weights().items())
    assert target.history is None


def test_resuming_the_same_architecture_still_works(tmp_path):
    x, y = _tokens()
    kw = dict(batch_size=8, **FAST)
    _gpt().fit(x, y, epochs=1, callbacks=[pgo.ModelCheckpoint(tmp_path / "ckpt.gguf")], **kw)
    hist = _gpt().fit(x, y, epochs=2, resume_from=tmp_path / "ckpt.gguf", **kw)
    assert hist.epoch == [0, 1]


def _edited_copy(src, dest, edit):
    """``src`` rewritten to ``dest`` with its configuration JSON passed through ``edit``."""
    out = GGUFFile()
    with GGUFFile.read(src) as f:
        for key in f.keys():
            out.set(key, f.get(key))
        out.set("pyggml_opt.config", json.dumps(edit(json.loads(f.get("pyggml_opt.config")))))
        for name in f.tensor_names():
            out.add_tensor(name, f.tensor(name))
    out.write(dest)


def test_a_config_edited_to_huge_sizes_is_refused_before_allocating(tmp_path):
    m = pgo.Sequential([pgo.layers.Linear(6, 16), pgo.layers.ReLU(), pgo.layers.Linear(16, 3)]).build((6,))
    m.save(tmp_path / "small.gguf")

    def widen(spec):
        spec["config"]["layers"][0]["config"]["out_features"] = 200_000_000  # 4.8 GB of float32 weights
        spec["config"]["layers"][2]["config"]["in_features"] = 200_000_000
        return spec

    _edited_copy(tmp_path / "small.gguf", tmp_path / "huge.gguf", widen)
    # in a child, whose peak memory is its own: before, load built (and initialised) the huge model first
    code = textwrap.dedent(f"""
        import resource, pyggml_opt as pgo
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            pgo.load({str(tmp_path / "huge.gguf")!r})
        except ValueError as exc:
            print("ValueError:", exc)
        print("grew_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ValueError: tensor '0.weight' has shape (16, 6) in the file, the model needs (200000000, 6)" in out.stdout
    grew_kib = int(out.stdout.split("grew_kib")[1])
    assert grew_kib < 100_000, out.stdout  # well under the 4.8 GB the configuration claims


@pytest.mark.parametrize("texts", [[b"hello"], b"hello", bytearray(b"hello"), ["ok", b"bytes"]],
                         ids=["list-of-bytes", "bytes", "bytearray", "mixed"])
def test_the_char_tokenizer_refuses_bytes(texts):
    tok = CharTokenizer.fit(["hello world"])
    with pytest.raises(TypeError, match="decode bytes first"):
        tok.encode(texts, 8)
    with pytest.raises(TypeError, match="decode bytes first"):
        CharTokenizer.fit(texts)
    np.testing.assert_array_equal(tok.encode(["hello"], 6), [[5, 4, 6, 6, 7, 0]])
