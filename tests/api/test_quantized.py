"""Models that keep parameters quantized (a Q8_0 / Q4_0 file read by pgo.load): what they keep, copy,
save and refuse. Their numbers: kernels/test_llama.py (against float64 numpy) and
integration/test_llama_cpp.py (against llama.cpp on the same files)."""
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core.tensor_data import Quantized
from pyggml_opt.data import CharTokenizer

TOK = CharTokenizer("abcdefghijklmnopqrstuvwxyz .,")
V, T = TOK.vocab_size, 8


@pytest.fixture
def quantized(tmp_path):
    """(a llama of width 32 loaded from its q8_0 file, its float32 original, some input ids)."""
    m = pgo.models.llama(V, T, 32, 1, 4, n_kv_heads=2)
    m.build((T,), seed=0)
    m.save(tmp_path / "q.gguf", tokenizer=TOK, quantize="q8_0")
    x = np.random.default_rng(0).integers(0, V, (3, T)).astype(np.int32)
    return pgo.load(tmp_path / "q.gguf"), m, x


def test_fit_refuses_quantized_parameters_naming_them(quantized):
    q, _, x = quantized
    before = q.get_weights()
    with pytest.raises(ValueError, match=r"keeps 9 parameters quantized and frozen \(blk0.attn.wk.weight, .*q8_0\)"):
        q.fit(x, x, epochs=1, verbose=0)
    after = q.get_weights()
    assert all(np.array_equal(before[n].data, after[n].data) for n in q.quantized())  # nothing trained


def test_float32_values_make_them_trainable_again(quantized):
    q, _, x = quantized
    q.set_weights({n: w.dequantize() for n, w in q.get_weights().items() if isinstance(w, Quantized)})
    assert q.quantized() == {}
    h = q.fit(x, x, epochs=2, verbose=0, optimizer=pgo.AdamW(lr=1e-2))
    assert np.isfinite(h["loss"]).all() and h["loss"][-1] < h["loss"][0]


def test_copies_pickles_and_files_keep_the_bytes(quantized, tmp_path):
    q, _, x = quantized
    logits = q.predict(x, logits=True)
    weights = q.get_weights()
    for other in (q.clone(), pickle.loads(pickle.dumps(q))):
        assert other.quantized() == q.quantized()
        assert all(np.array_equal(w.data, weights[n].data) for n, w in other.get_weights().items() if n in q.quantized())
        np.testing.assert_array_equal(other.predict(x, logits=True), logits)
    for tokenizer in (None, TOK):  # pyggml_opt's own layout, llama.cpp's: written as they are
        q.save(tmp_path / "again.gguf", tokenizer=tokenizer)
        back = pgo.load(tmp_path / "again.gguf")
        assert back.quantized() == q.quantized()
        np.testing.assert_array_equal(back.predict(x, logits=True), logits)
    assert pgo.saving.load_metadata(tmp_path / "again.gguf")["general.file_type"] == 7  # q8_0


def test_summary_counts_them_as_non_trainable(quantized):
    q, m, _ = quantized
    frozen = sum(int(np.prod(q.param_shapes[n])) for n in q.quantized())
    lines = q.summary().splitlines()
    assert lines[-1] == f"Non-trainable params: {frozen:,}" and lines[-2] == f"Trainable params: {q.count_params() - frozen:,}"
    assert float(lines[-3].split("(")[1].split()[0]) < float(m.summary().splitlines()[-3].split("(")[1].split()[0]) / 3


def test_generate_runs_on_quantized_weights(quantized):
    q, _, x = quantized
    ids = q.generate(x[0, :3], 6, temperature=0)
    assert ids.shape == (9,) and ids.dtype.kind == "i"
    # greedy: each new id is the argmax of predict's logits for the window before it
    window = np.zeros((1, T), np.int32)
    window[0, :8] = ids[:8]
    assert ids[8] == q.predict(window, logits=True)[0, 7].argmax()


def test_a_gpt2_position_table_loads_as_float32(tmp_path):
    # what a layer only multiplies or picks rows from stays quantized; the position table, which
    # PositionalEmbedding adds, loads as the float32 values the file means (llama.cpp dequantizes its rows)
    g = pgo.models.gpt(V, T, 32, 1, 4, head_bias=False)
    g.build((T,), seed=0)
    assert "pos.weight" not in g.quantizable() and "blk0.attn.wq.weight" in g.quantizable()
    g.save(tmp_path / "g.gguf", tokenizer=TOK, quantize="q8_0")
    back = pgo.load(tmp_path / "g.gguf")
    pos = back.get_weights()["pos.weight"]
    assert isinstance(pos, np.ndarray) and "pos.weight" not in back.quantized() and "blk0.attn.wq.weight" in back.quantized()
    with pgo.core.GGUFFile.read(tmp_path / "g.gguf") as f:
        np.testing.assert_array_equal(pos, f.weight("position_embd.weight").dequantize())
    # the fused query / key / value matrix is cut by rows into the three quantized projections
    w = back.get_weights()
    assert [w[f"blk0.attn.w{p}.weight"].shape for p in "qkv"] == [(32, 32)] * 3


def test_bad_quantized_values_are_refused(quantized):
    q, _, _ = quantized
    w = q.get_weights()
    wq = w["blk0.attn.wq.weight"]
    with pytest.raises(ValueError, match="expected shape \\(32, 32\\), got q8_0 values of shape \\(16, 32\\)"):
        q.set_weights({"blk0.attn.wq.weight": w["blk0.attn.wk.weight"]})
    bad = wq.data.copy()
    bad[0, :2] = np.frombuffer(np.float16(np.nan).tobytes(), np.uint8)  # a block's scale
    with pytest.raises(ValueError, match="'blk0.attn.wq.weight' \\(q8_0\\) contains NaN"):
        q.set_weights({"blk0.attn.wq.weight": Quantized("q8_0", (32, 32), bad)})
    with pytest.raises(ValueError, match="'blk0.attn_norm.weight' cannot be kept quantized"):
        q.set_weights({"blk0.attn_norm.weight": Quantized.of(np.ones(32, np.float32), "q8_0")})
    with pytest.raises(ValueError, match="uint8"):
        Quantized("q8_0", (32, 32), bad[:, :10])
    with pytest.raises(ValueError, match="multiple of 32"):
        Quantized.of(np.ones((2, 40), np.float32), "q4_0")
    with pytest.raises(ValueError, match="type_name"):
        Quantized("q5_k", (32, 32), bad)
