"""pgo.models.llama: its forward pass against float64 numpy (grouped-query attention with 1, 2 and 4
key / value heads, llama.cpp's rotary positions), its gradients against central finite differences,
training with fit, and its files: pyggml_opt's own layout and llama.cpp's (read back by pgo.load; a
gpt as llama.cpp's gpt2 likewise); models that llama.cpp's layouts do not fit are refused naming the
layer. llama.cpp itself judges the files in integration/test_llama_cpp.py."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt.data import CharTokenizer
from pyggml_opt.models.lm import GPT2, LLAMA
from support.llama_numpy import gpt2_logits, llama_logits, rope_neox, rope_norm
from support import FAST, check_gradients, greedy_by_predict
from support.numerics import finite_differences

TOK = CharTokenizer("abcdefghijklmnopqrstuvwxyz .,")
V, T, D, H = TOK.vocab_size, 12, 16, 4


def small_llama(kv=2, seed=0, **kw):
    m = pgo.models.llama(V, T, D, 2, H, n_kv_heads=kv, ffn_dim=24, rope_theta=500.0, **kw)
    m.build((T,), seed=seed)
    return m


def llama_keys(kv, eps=1e-5, base=500.0, layers=2):
    return {"llama.attention.head_count": H, "llama.attention.head_count_kv": kv, "llama.block_count": layers,
            "llama.attention.layer_norm_rms_epsilon": eps, "llama.rope.freq_base": base}


def numpy_logits(w, x, kv):
    t = LLAMA.tensors.to_file({k: np.asarray(v, np.float64) for k, v in w.items()})
    return np.stack([llama_logits(llama_keys(kv), t, ids) for ids in x])


def tokens(n=3, seed=0):
    return np.random.default_rng(seed).integers(0, V, (n, T))


# the file names of the variants' tensors, as llama.cpp's qwen2 / qwen3 name them
VARIANT_TENSORS = pgo.models.lm.TensorMap(
    LLAMA.tensors.names, {**LLAMA.tensors.block, **{f"attn.w{p}.bias": f"attn_{p}.bias" for p in "qkv"},
                          "attn.q_norm.weight": "attn_q_norm.weight", "attn.k_norm.weight": "attn_k_norm.weight"})


@pytest.mark.parametrize("variant", [dict(head_dim=6), dict(rope_mode="neox"), dict(qkv_bias=True),
                                     dict(qk_norm=True), dict(head_dim=6, rope_mode="neox", qkv_bias=True, qk_norm=True)],
                         ids=["head_dim", "neox", "qkv_bias", "qk_norm", "all"])
def test_llama_family_variants_match_float64_numpy(variant):
    """Head sizes other than dim / heads, NEOX rope, q / k / v biases and per-head q / k norms (the
    Qwen2 / Qwen3 blocks) against the float64 reference, with random norm weights (ones would hide them)."""
    m = small_llama(2, seed=3, **variant)
    rng = np.random.default_rng(4)
    m.set_weights({k: rng.uniform(0.5, 1.5, v.shape).astype(np.float32) for k, v in m.get_weights().items()
                   if k.endswith("_norm.weight")})
    head = variant.get("head_dim", D // H)
    assert m.param_shapes["blk0.attn.wq.weight"] == (H * head, D) and m.param_shapes["blk0.attn.wo.weight"] == (D, H * head)
    assert ("blk0.attn.wk.bias" in m.param_shapes) == variant.get("qkv_bias", False)
    keys = {**llama_keys(2), "llama.attention.key_length": head}
    t = VARIANT_TENSORS.to_file({k: np.asarray(v, np.float64) for k, v in m.get_weights().items()})
    rope = rope_neox if variant.get("rope_mode") == "neox" else rope_norm
    x = tokens()
    ref = np.stack([llama_logits(keys, t, ids, rope) for ids in x])
    np.testing.assert_allclose(m.predict(x, logits=True), ref, rtol=0, atol=3e-6)
    # decoding with the key / value cache gives the same greedy tokens as the whole window
    prompt = x[0, :3].astype(np.int32)
    assert np.array_equal(m.generate(prompt, 4, temperature=0), greedy_by_predict(m, prompt, 4))


def sgd_step_and_loss(m, x, y):
    """(m's float64 weights, the gradient of one SGD step of lr 1 on (x, y), the float64 mean
    cross-entropy of weights on (x, y) as a function for finite differences)."""
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    m.fit(x, y, epochs=1, batch_size=len(x), shuffle=False, optimizer=pgo.SGD(lr=1.0), **FAST)
    got = {k: w0[k] - v for k, v in m.get_weights().items()}

    def loss(w):
        z = numpy_logits(w, x, 2)
        z = z - z.max(axis=-1, keepdims=True)
        lsm = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        return float(-np.take_along_axis(lsm, y[..., None], axis=-1).mean())

    return w0, got, loss


@pytest.mark.parametrize("kv", [4, 2, 1])
def test_forward_matches_float64_numpy(kv):
    m = small_llama(kv, seed=kv)
    x = tokens()
    ref = numpy_logits(m.get_weights(), x, kv)
    # float32 through 2 blocks: measured max |difference| 4e-7 for logits of magnitude ~2
    np.testing.assert_allclose(m.predict(x, logits=True), ref, rtol=0, atol=3e-6)


def test_no_step_sees_a_later_one():
    m = small_llama()
    x = tokens()
    changed = x.copy()
    changed[:, 5:] = (changed[:, 5:] + 1) % V
    a, b = m.predict(x, logits=True), m.predict(changed, logits=True)
    np.testing.assert_array_equal(a[:, :5], b[:, :5])
    assert np.abs(a[:, 5:] - b[:, 5:]).max() > 1e-3


def test_gradients_match_finite_differences():
    m = small_llama(kv=2, seed=3)
    x = tokens(4, seed=1)
    y = (x * 3 + 1) % V
    w0, got, loss = sgd_step_and_loss(m, x, y)

    names = [f"blk{i}.{p}" for i in (0, 1) for p in ("attn.wq.weight", "attn.wk.weight", "attn.wv.weight", "attn.wo.weight", "attn_norm.weight",
                                                      "ffn.w_gate.weight", "ffn.w_up.weight", "ffn.w_down.weight", "ffn_norm.weight")]
    check_gradients(loss, w0, got, names + ["tok.weight", "norm.weight", "head.weight"], eps=1e-6, tol=2e-6)


def test_tied_embeddings_get_the_gradients_of_both_uses():
    """tie_embeddings: tok.weight is the input table and the output matrix; one SGD step of lr 1 moves it
    by the sum of both gradients, checked against central finite differences of a float64 forward
    whose output layer reads token_embd (llama.cpp's fallback). Rows of ids in the input get both
    contributions, the others the output layer's only."""
    m = small_llama(kv=2, seed=4, tie_embeddings=True)
    x = tokens(4, seed=2)
    y = (x * 3 + 1) % V
    w0, got, loss = sgd_step_and_loss(m, x, y)
    assert "head.weight" not in w0
    present, absent = int(x[0, 0]), int(np.setdiff1d(np.arange(V), x)[0])
    entries = [(present, 0), (present, D - 1), (absent, 3)]
    fd = finite_differences(loss, w0, "tok.weight", 1e-6, entries)
    for idx in entries:
        assert abs(got["tok.weight"][idx] - fd[idx]) <= 2e-6, (idx, got["tok.weight"][idx], fd[idx])
    check_gradients(loss, w0, got, ["norm.weight", "blk1.ffn.w_down.weight"], eps=1e-6, tol=2e-6)


def test_tied_embeddings_start_with_logits_near_one():
    # the shared table starts at N(0, 1 / dim): logits of RMS ~1 (N(0, 1) would give ~sqrt(dim) = 4 here)
    m = small_llama(tie_embeddings=True)
    assert abs(m.get_weights()["tok.weight"].std() * np.sqrt(D) - 1) < 0.15
    assert 0.5 < np.sqrt((m.predict(tokens(), logits=True) ** 2).mean()) < 2


def test_fit_learns_a_copy_task():
    # target at step t: the id at step t - 2 (the first two steps: their own id); attention must find
    # the step two back by its rotary position. Measured: final loss 0.04 from 3.4
    rng = np.random.default_rng(0)
    x = rng.integers(2, V, (256, T))
    y = np.concatenate([x[:, :2], x[:, :-2]], axis=1)
    m = pgo.models.llama(V, T, 32, 2, 4, n_kv_heads=2)
    h = m.fit(x, y, epochs=30, batch_size=32, optimizer=pgo.AdamW(lr=3e-3), seed=0, **FAST)
    assert h["loss"][0] > 2.5 and h["loss"][-1] < 0.3


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="n_kv_heads"):
        pgo.models.llama(V, T, D, 1, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="even head size"):
        pgo.models.llama(V, T, 12, 1, 4)
    with pytest.raises(ValueError, match="rope_theta"):
        pgo.models.llama(V, T, D, 1, 4, rope_theta=1.0)


# ---- files ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokenizer", [None, TOK])
def test_llama_saves_and_loads_as_the_same_model(tmp_path, tokenizer):
    m = small_llama(kv=2, norm_eps=1e-6)
    m.save(tmp_path / "m.gguf", tokenizer=tokenizer)
    meta = pgo.saving.load_metadata(tmp_path / "m.gguf")
    assert meta["general.architecture"] == ("llama" if tokenizer else "pyggml_opt")
    back = pgo.load(tmp_path / "m.gguf")
    assert back.get_config() == m.get_config() and back.loss == "cross_entropy"
    x = tokens()
    np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))


def test_llama_cpp_keys_and_tensors(tmp_path):
    m = small_llama(kv=2)
    m.save(tmp_path / "m.gguf", tokenizer=TOK)
    with pgo.core.GGUFFile.read(tmp_path / "m.gguf") as f:
        assert f.get("llama.attention.head_count_kv") == 2 and f.get("llama.rope.dimension_count") == D // H
        assert f.get("llama.feed_forward_length") == 24 and f.get("llama.context_length") == T
        assert abs(f.get("llama.rope.freq_base") - 500.0) == 0 and f.get_array("tokenizer.ggml.tokens")[2] == "a"
        assert f.tensor("blk.1.attn_k.weight").shape == (8, D) and f.tensor("output.weight").shape == (V, D)
        assert len(f.tensor_names()) == 3 + 2 * 9


@pytest.mark.parametrize("tokenizer", [None, TOK])
def test_tied_llama_saves_one_table_and_loads_tied(tmp_path, tokenizer):
    m = small_llama(kv=2, tie_embeddings=True)
    untied = small_llama(kv=2)
    assert m.count_params() == untied.count_params() - V * D and set(m.param_shapes) == set(untied.param_shapes) - {"head.weight"}
    m.save(tmp_path / "m.gguf", tokenizer=tokenizer)
    with pgo.core.GGUFFile.read(tmp_path / "m.gguf") as f:
        names = f.tensor_names()
    assert "output.weight" not in names and "head.weight" not in names
    assert ("token_embd.weight" if tokenizer else "tok.weight") in names
    back = pgo.load(tmp_path / "m.gguf")
    assert back.tied == {"head.weight": "tok.weight"} and back.get_config() == m.get_config()
    x = tokens()
    np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))
    np.testing.assert_allclose(m.predict(x, logits=True), numpy_logits(m.get_weights(), x, 2), rtol=0, atol=3e-6)
    # the weights of a tied model lack those of an untied one
    with pytest.raises(ValueError, match="has the parameters .*'head.weight'"):
        untied.build_with_weights((T,), back.get_weights())


def test_tied_gpt_saves_as_gpt2_without_an_output_tensor(tmp_path):
    m = pgo.models.gpt(V, T, D, 2, H, head_bias=False, tie_embeddings=True)
    m.build((T,), seed=2)
    for tokenizer, arch in ((TOK, "gpt2"), (None, "pyggml-gpt")):
        m.save(tmp_path / "g.gguf", tokenizer=tokenizer)
        meta = pgo.saving.load_metadata(tmp_path / "g.gguf")
        assert meta["general.architecture"] == arch
        back = pgo.load(tmp_path / "g.gguf")
        assert back.get_config() == m.get_config() and "head.weight" not in back.param_shapes
    x = tokens()
    keys = {"gpt2.attention.head_count": H, "gpt2.attention.layer_norm_epsilon": 1e-5, "gpt2.block_count": 2}
    t = GPT2.tensors.to_file({k: v.astype(np.float64) for k, v in m.get_weights().items()})
    assert "output.weight" not in t
    np.testing.assert_allclose(m.predict(x, logits=True), np.stack([gpt2_logits(keys, t, ids) for ids in x]),
                               rtol=0, atol=3e-6)


def test_bad_ties_are_refused():
    layers = lambda: [L.Embedding(V, D, name="tok"), L.Linear(D, V, bias=False, name="head")]  # noqa: E731
    with pytest.raises(ValueError, match="one shape: 'head.weight' is \\(30, 8\\), 'tok.weight' \\(31, 16\\)"):
        pgo.Sequential([L.Embedding(V, D, name="tok"), L.Linear(D, 8), L.Linear(8, 30, bias=False, name="head")],
                       input_shape=(T,), tied={"head.weight": "tok.weight"})
    with pytest.raises(ValueError, match="'head.bias' is none of the layers' parameters"):
        pgo.Sequential(layers(), input_shape=(T,), tied={"head.bias": "tok.weight"})
    with pytest.raises(ValueError, match="tied to another parameter"):
        pgo.Sequential(layers(), tied={"head.weight": "head.weight"})
    with pytest.raises(ValueError, match="not tied itself"):
        pgo.Sequential(layers(), tied={"head.weight": "tok.weight", "tok.weight": "x.weight"})
    with pytest.raises(TypeError, match="str -> str"):
        pgo.Sequential(layers(), tied={"head.weight": 3})
    # a tie no builder makes: not a llama for llama.cpp
    odd = pgo.models.llama(V, T, D, 1, H)
    odd = pgo.Sequential(odd.layers, input_shape=(T,), tied={"blk0.attn.wk.weight": "blk0.attn.wv.weight"})
    with pytest.raises(ValueError, match="tied parameters .*blk0.attn.wk.* are not a llama's"):
        odd.save("/nonexistent/x.gguf", tokenizer=TOK)


def test_gpt_saves_as_gpt2_and_loads_as_the_same_model(tmp_path):
    m = pgo.models.gpt(V, T, D, 2, H, dropout=0.1, head_bias=False)
    m.build((T,), seed=1)
    m.save(tmp_path / "g.gguf", tokenizer=TOK)
    with pgo.core.GGUFFile.read(tmp_path / "g.gguf") as f:
        assert f.get("general.architecture") == "gpt2"
        qkv = f.tensor("blk.0.attn_qkv.weight")
        w = m.get_weights()
        np.testing.assert_array_equal(qkv, np.concatenate([w["blk0.attn.wq.weight"], w["blk0.attn.wk.weight"], w["blk0.attn.wv.weight"]]))
    back = pgo.load(tmp_path / "g.gguf")
    assert back.get_config() == m.get_config()  # the dropout rate too
    x = tokens()
    ours = m.predict(x, logits=True)
    np.testing.assert_array_equal(back.predict(x, logits=True), ours)
    keys = {"gpt2.attention.head_count": H, "gpt2.attention.layer_norm_epsilon": 1e-5, "gpt2.block_count": 2}
    t = GPT2.tensors.to_file({k: v.astype(np.float64) for k, v in w.items()})
    np.testing.assert_allclose(ours, np.stack([gpt2_logits(keys, t, ids) for ids in x]), rtol=0, atol=3e-6)


def test_models_llama_cpp_cannot_run_are_refused_naming_the_layer(tmp_path):
    mlp = pgo.Sequential([L.Linear(4, 8, name="dense"), L.ReLU(), L.Linear(8, V)])
    mlp.build((4,))
    with pytest.raises(ValueError, match="layer 0 .*'dense'.*does not map"):
        mlp.save(tmp_path / "x.gguf", tokenizer=TOK)
    biased = pgo.models.gpt(V, T, D, 1, H)  # an output bias: llama.cpp's gpt2 has none
    with pytest.raises(ValueError, match=r"gpt2: head_bias=True, where a gpt2 file has head_bias=False \(build the "
                                         r"model with head_bias=False\)"):
        biased.save(tmp_path / "x.gguf", tokenizer=TOK)
    rope = pgo.models.gpt(V, T, D, 1, H, positions="rope", head_bias=False)
    with pytest.raises(ValueError, match="gpt2: positions='rope', where a gpt2 file has positions='learned'"):
        rope.save(tmp_path / "x.gguf", tokenizer=TOK)
    with pytest.raises(ValueError, match="needs the model's tokenizer"):
        small_llama().save(tmp_path / "x.gguf", format="llama.cpp")
    with pytest.raises(ValueError, match="the tokenizer has 31 tokens"):
        pgo.models.llama(V + 1, T, D, 1, H).save(tmp_path / "x.gguf", tokenizer=TOK)
    with pytest.raises(ValueError, match="format must be one of"):
        small_llama().save(tmp_path / "x.gguf", format="onnx")
    assert not (tmp_path / "x.gguf").exists()


def test_a_llama_file_with_tensors_the_model_lacks_is_refused(tmp_path):
    m = small_llama()
    m.save(tmp_path / "m.gguf", tokenizer=TOK, extra_tensors={"rope_freqs.weight": np.ones(2, np.float32)})
    with pytest.raises(ValueError, match="unexpected \\['rope_freqs.weight'\\]"):
        pgo.load(tmp_path / "m.gguf")


def test_q8_0_blocks_hold_each_value_within_half_a_step():
    x = np.random.default_rng(0).normal(size=(3, 64)).astype(np.float32)
    raw = pgo.core.tensor_data.quantize(x, "q8_0").reshape(3 * 2, 34)  # blocks: float16 scale, 32 int8
    scale = raw[:, :2].copy().view(np.float16).astype(np.float64)
    values = raw[:, 2:].view(np.int8).astype(np.float64) * scale
    np.testing.assert_allclose(scale[:, 0], np.abs(x.reshape(6, 32)).max(axis=1) / 127, rtol=1e-3)
    assert (np.abs(values - x.reshape(6, 32)) <= scale / 2 * 1.01).all()
    assert pgo.core.tensor_data.quantize(x, "q4_0").size == 3 * 2 * 18  # float16 scale, 32 4-bit values
    with pytest.raises(ValueError, match="multiple of 32"):
        pgo.core.tensor_data.quantize(x[:, :40], "q8_0")


def test_quantized_llama_cpp_files(tmp_path):
    m = small_llama()
    with pytest.raises(ValueError, match="quantize needs format=.llama.cpp."):
        m.save(tmp_path / "x.gguf", quantize="q8_0")
    with pytest.raises(ValueError, match="quantize"):
        m.save(tmp_path / "x.gguf", tokenizer=TOK, quantize="q5_k")
    wide = pgo.models.llama(V, T, 32, 1, 4)  # rows of 32 values: quantized; the norms stay float32
    wide.build((T,), seed=0)
    wide.save(tmp_path / "q.gguf", tokenizer=TOK, quantize="q8_0")
    meta = pgo.saving.load_metadata(tmp_path / "q.gguf")
    assert meta["general.file_type"] == 7


# the float32 model's distance to the float64 forward over the stored weights, by the weights' own
# rounding, about twice what was measured (dims 32 / 256 / the type's block: f16 0.03 %, bf16 0.26 %, q8_0
# 0.7 %, q6_K 2.3 %, q5_K 4.7 %, q5_1 5.1 %, q5_0 5.7 %, q4_K 8.7 %, iq4_xs 10.2 %, q4_1 10.9 %, iq4_nl 11.4 %,
# q4_0 12.5 %, nvfp4 14 %, q3_K 19 %, mxfp4 19 %, iq3_s 21 %, iq3_xxs 29 %, iq2_s 35 %, q2_K 38 %, iq1_m 68 %,
# q2_0 70 %, tq1_0 / tq2_0 81 % (ternary weights), q1_0 85 %)
WEIGHT_ROUNDING = {"f16": 0.001, "bf16": 0.006, "q8_0": 0.02, "q6_K": 0.05, "q5_K": 0.1, "q5_1": 0.1, "q5_0": 0.12,
                   "q4_K": 0.2, "iq4_xs": 0.2, "q4_1": 0.25, "iq4_nl": 0.25, "q4_0": 0.3, "nvfp4": 0.3, "q3_K": 0.4,
                   "mxfp4": 0.4, "iq3_s": 0.45, "iq3_xxs": 0.6, "iq2_s": 0.7, "q2_K": 0.75, "iq1_m": 1.3, "q2_0": 1.4,
                   "tq1_0": 1.6, "tq2_0": 1.6, "q1_0": 1.7}


QUANTIZED_TYPES = pgo.core.tensor_data.QUANTIZED_TYPES
# every type ggml computes weights in that its quantizer writes without an importance matrix
WRITABLE = sorted(t for t, kind in QUANTIZED_TYPES.items() if not pgo._lib.lib.ggml_quantize_requires_imatrix(kind))


def test_the_types_are_ggmls_own():
    # F16 / BF16, the legacy types, the K-quants and the i-quants: what llama.cpp's files hold
    assert {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl",
            "iq4_xs", "iq2_xxs"} <= QUANTIZED_TYPES.keys() and "f32" not in QUANTIZED_TYPES
    assert {t: pgo.core.tensor_data.block_size(t) for t in ("f16", "q8_0", "q4_K", "iq4_nl")} == {
        "f16": 1, "q8_0": 32, "q4_K": 256, "iq4_nl": 32}
    with pytest.raises(ValueError, match="only with an importance matrix"):
        pgo.core.tensor_data.Quantized.of(np.ones((2, 256), np.float32), "iq2_xxs")


@pytest.mark.parametrize("quantize", WRITABLE)
def test_a_quantized_file_computes_with_its_weights_as_stored(tmp_path, quantize):
    """pgo.load keeps a quantized file's matrices in their type; predict equals a float64 forward over
    the dequantized weights up to ggml's rounding of the activations that meet them (MUL_MAT turns its
    float32 operand into the weight type's partner: F16 / BF16 values, or 8-bit blocks for the
    quantized types, steps of a block's largest value / 127)."""
    dim = max(32, pgo.core.tensor_data.block_size(quantize))  # rows of whole blocks
    wide = pgo.models.llama(V, T, dim, 2, 4, n_kv_heads=2, ffn_dim=dim)
    wide.build((T,), seed=0)
    wide.save(tmp_path / "q.gguf", tokenizer=TOK, quantize=quantize)
    # llama.cpp's name for a file of that type, where its enum has one
    file_type = pgo.saving.load_metadata(tmp_path / "q.gguf").get("general.file_type")
    assert file_type == pgo.saving.model_file.FILE_TYPES.get(quantize)
    back = pgo.load(tmp_path / "q.gguf")
    weights = back.get_weights()
    kept = back.quantized()
    # every matrix (rows of whole blocks: the token table, the projections, the output), not the norms
    assert set(kept) == {n for n, s in wide.param_shapes.items() if len(s) == 2} and set(kept.values()) == {quantize}
    assert all(isinstance(weights[n], pgo.core.tensor_data.Quantized) for n in kept)
    dense = {n: w.dequantize() if n in kept else w for n, w in weights.items()}
    x = tokens()
    t = LLAMA.tensors.to_file({k: np.asarray(v, np.float64) for k, v in dense.items()})
    keys = {**llama_keys(2, base=10000.0), "llama.attention.head_count": 4}
    ref = np.stack([llama_logits(keys, t, ids) for ids in x])
    got = back.predict(x, logits=True)
    # An activation block rounded to steps of max / 127 has a relative RMS error of about
    # 1 / (127 * sqrt(12)) * (max / RMS ~ 2.5) = 0.6 %, and so has each product: measured 0.4-0.9 % for
    # the quantized types, 0.02 % for F16, 0.19 % for BF16 (8 bits of mantissa)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 0.02
    assert np.linalg.norm(wide.predict(x, logits=True) - ref) / np.linalg.norm(ref) < WEIGHT_ROUNDING[quantize]

