"""Models that keep parameters quantized (a Q8_0 / Q4_0 file read by pgo.load): what they keep, copy,
save and refuse. Their numbers: kernels/test_llama.py (against float64 numpy) and
integration/test_llama_cpp.py (against llama.cpp on the same files)."""
import hashlib
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


def test_fit_trains_the_float32_parameters_around_quantized_ones(quantized):
    """The quantized matrices stay frozen, bit for bit; the float32 ones (the norms) train, the gradient
    reaching them through the quantized matrices (ggml's CPU OUT_PROD of a quantized matrix)."""
    q, _, x = quantized
    before = q.get_weights()
    h = q.fit(x, x, epochs=3, verbose=0, optimizer=pgo.AdamW(lr=1e-2), n_threads=1)
    after = q.get_weights()
    assert all(np.array_equal(before[n].data, after[n].data) for n in q.quantized())
    assert not np.array_equal(before["blk0.attn_norm.weight"], after["blk0.attn_norm.weight"])
    assert h["loss"][-1] < h["loss"][0]


def test_fit_refuses_weights_no_gradient_passes_through(tmp_path):
    """BF16: ggml's CPU backend has no OUT_PROD of a BF16 matrix, so no gradient reaches what is below
    such a weight; fit says so before anything runs (it was a ggml abort)."""
    m = pgo.models.llama(V, T, 32, 1, 4, n_kv_heads=2)
    m.save(tmp_path / "bf16.gguf", tokenizer=TOK, quantize="bf16")
    b = pgo.load(tmp_path / "bf16.gguf")
    b.enable_lora(rank=2)
    x = np.random.default_rng(0).integers(0, V, (4, T)).astype(np.int32)
    with pytest.raises(ValueError, match=r"fit cannot pass gradients through bf16 weights \(blk0.attn.wk.weight, .*no OUT_PROD"):
        b.fit(x, x, epochs=1, verbose=0)
    assert "bf16" not in pgo.core.tensor_data.GRADIENT_TYPES and {"f16", "q8_0", "q4_K", "q6_K"} <= pgo.core.tensor_data.GRADIENT_TYPES


@pytest.mark.parametrize("kind", ["q8_0", "q4_K"])
def test_lora_on_a_quantized_base_trains_as_on_its_float32_values(kind, tmp_path):
    """LoRA (rank 8, all-linear) on a base of Q8_0 / Q4_K matrices against the same fit on a float32 base
    holding their dequantized values: the only difference is that ggml multiplies a quantized matrix by
    activations it quantizes too (Q8_0 / Q8_K: ~0.4 % per value), so the losses agree to within 2 %
    relative (measured on Q8_0: 1e-4 on the first epoch, 1.2e-3 after three; Q4_K likewise), the base
    stays bit for bit."""
    m = pgo.models.llama(V, T, 256, 2, 4, n_kv_heads=2, ffn_dim=512)  # rows of 256: K-quant blocks
    m.build((T,), seed=3)
    m.save(tmp_path / "base.gguf", tokenizer=TOK, quantize=kind)
    q = pgo.load(tmp_path / "base.gguf")
    f = pgo.load(tmp_path / "base.gguf")
    f.set_weights({n: w.dequantize() for n, w in f.get_weights().items() if isinstance(w, Quantized)})
    x = np.random.default_rng(0).integers(0, V, (64, T)).astype(np.int32)
    y = (x * 3 + 1) % V
    losses = []
    for model in (q, f):
        model.enable_lora(rank=8, alpha=16, seed=0)
        base = {n: w for n, w in model.get_weights().items() if n in model.quantized()}
        h = model.fit(x, y, epochs=3, batch_size=16, optimizer=pgo.AdamW(lr=1e-2), seed=0, verbose=0, n_threads=2)
        losses.append(h["loss"])
        assert all(np.array_equal(w.data, model.get_weights()[n].data) for n, w in base.items())
    assert kind in set(q.quantized().values())
    np.testing.assert_allclose(losses[0], losses[1], rtol=2e-2)
    assert losses[0][-1] < 0.5 * losses[0][0]


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


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_quantized_weights_are_the_files_memory(quantized, tmp_path):
    """pgo.load maps the file read-only: the CPU backend computes on the mapped bytes (no copy), the
    model outlives the file's name, and the file is never written."""
    q, m, x = quantized
    path = tmp_path / "q.gguf"
    digest = _sha256(path)
    logits = q.predict(x, logits=True)
    weights = q.get_weights()
    assert all(weights[n].mapped for n in q.quantized())
    # the float32 norms: writable (copy-on-write: fit trains them in pages of the process's own)
    assert all(isinstance(weights[n], np.ndarray) and weights[n].flags.writeable for n in m.param_shapes
               if n not in q.quantized())
    # the same values copied into the backend's own memory compute the same logits, bit for bit
    copied = pgo.load(path)
    copied.set_weights({n: Quantized(w.type_name, w.shape, w.data.copy()) for n, w in copied.get_weights().items()
                        if isinstance(w, Quantized)})
    assert not any(w.mapped for w in copied.get_weights().values() if isinstance(w, Quantized))
    np.testing.assert_array_equal(copied.predict(x, logits=True), logits)
    assert _sha256(path) == digest
    path.rename(tmp_path / "moved.gguf")  # the mapping holds the file: the model keeps working
    (tmp_path / "moved.gguf").unlink()
    np.testing.assert_array_equal(q.predict(x, logits=True), logits)
    assert q.generate(x[0, :3], 4, temperature=0).shape == (7,)


def test_new_values_for_mapped_weights_leave_the_file_alone(quantized, tmp_path):
    q, m, x = quantized
    path = tmp_path / "q.gguf"
    digest = _sha256(path)
    q.predict(x)  # the weights are in ggml memory: the file's mapped pages
    name = "blk0.attn.wq.weight"
    new = Quantized.of(m.get_weights()["blk0.attn.wk.weight"].repeat(2, axis=0), "q8_0")
    q.set_weights({name: new})
    assert not q.get_weights()[name].mapped and np.array_equal(q.get_weights()[name].data, new.data)
    assert q.get_weights()["blk0.attn.wk.weight"].mapped  # the others stay mapped
    q.predict(x)
    assert _sha256(path) == digest
    # a copy's weights share the mapped bytes (read-only: nothing can change them) and a pickle holds them
    assert pickle.loads(pickle.dumps(q)).get_weights()["blk0.attn.wk.weight"].data.tobytes() == \
        q.get_weights()["blk0.attn.wk.weight"].data.tobytes()
    with pytest.raises(ValueError, match="read-only"):
        q.get_weights()["blk0.attn.wk.weight"].data[0, 0] = 1


def _keys(path):
    """Every key of a GGUF file but pyggml_opt's own, with its value as the file types it."""
    with pgo.core.GGUFFile.read(path) as f:
        return {k: f.get_typed(k) for k in f.keys() if not k.startswith("pyggml_opt.")}


def _same(a, b):
    return type(a) is type(b) and (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b)


def test_saving_again_keeps_the_files_keys_and_types(quantized, tmp_path):
    """A model read from a llama.cpp file saves back as one (its default layout), its tensors in their
    types and every key of the file it does not write itself as it was (type included: llama.cpp checks
    them); a tokenizer given replaces the file's."""
    q, m, x = quantized
    extra = {"general.name": "a test model", "general.quantization_version": np.uint32(2),
             "llama.unknown_flag": True, "llama.unknown_floats": np.array([1.5, 2.5], np.float32)}
    m.save(tmp_path / "named.gguf", tokenizer=TOK, quantize="q8_0", extra=extra)
    back = pgo.load(tmp_path / "named.gguf")
    back.save(tmp_path / "again.gguf")
    before, after = _keys(tmp_path / "named.gguf"), _keys(tmp_path / "again.gguf")
    assert before.keys() == after.keys() and all(_same(before[k], after[k]) for k in before)
    tokens = pgo.text.vocab_metadata(TOK)["tokenizer.ggml.tokens"]
    assert isinstance(after["general.quantization_version"], np.uint32) and after["tokenizer.ggml.tokens"] == tokens
    again = pgo.load(tmp_path / "again.gguf")
    assert again.quantized() == q.quantized()
    np.testing.assert_array_equal(again.predict(x, logits=True), q.predict(x, logits=True))
    # copies keep the keys; a tokenizer given replaces the file's, an extra key may change a kept one
    other = pgo.data.CharTokenizer("abcdefghijklmnopqrstuvwxyz .;")
    pickle.loads(pickle.dumps(back)).save(tmp_path / "other.gguf", tokenizer=other, extra={"general.name": "renamed"})
    keys = _keys(tmp_path / "other.gguf")
    assert keys["tokenizer.ggml.tokens"] == pgo.text.vocab_metadata(other)["tokenizer.ggml.tokens"]
    assert keys["general.name"] == "renamed"
    assert keys["llama.unknown_flag"] is True


def test_a_file_that_cannot_be_mapped_is_read_once(quantized, tmp_path, monkeypatch):
    q, _, x = quantized

    monkeypatch.setattr(pgo.core.GGUFFile, "_mapping", lambda self: None)  # as where mmap fails
    read = pgo.load(tmp_path / "q.gguf")
    assert not any(w.mapped for w in read.get_weights().values() if isinstance(w, Quantized))
    np.testing.assert_array_equal(read.predict(x, logits=True), q.predict(x, logits=True))


def test_a_float32_files_weights_train_copy_on_write(tmp_path):
    """A float32 llama.cpp file's weights are the mapping too (copy-on-write): fit trains them as it trains
    weights in memory of their own, bit for bit, and the file stays as it was."""
    m = pgo.models.llama(V, T, 32, 1, 4, n_kv_heads=2)
    m.build((T,), seed=0)
    path = tmp_path / "f.gguf"
    m.save(path, tokenizer=TOK)
    digest = _sha256(path)
    x = np.random.default_rng(1).integers(0, V, (16, T)).astype(np.int32)
    mapped, own = pgo.load(path), pgo.load(path)
    own.set_weights(own.get_weights())  # copies: memory of its own
    for model in (mapped, own):
        model.fit(x, x, epochs=2, batch_size=8, verbose=0, seed=0, optimizer=pgo.AdamW(lr=1e-2))
    trained, reference, start = mapped.get_weights(), own.get_weights(), m.get_weights()
    assert all(np.array_equal(trained[n], reference[n]) for n in trained)
    assert not np.array_equal(trained["blk0.attn.wq.weight"], start["blk0.attn.wq.weight"])
    assert _sha256(path) == digest
    np.testing.assert_array_equal(pgo.load(path).get_weights()["blk0.attn.wq.weight"], start["blk0.attn.wq.weight"])
