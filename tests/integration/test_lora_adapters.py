"""LoRA adapters as llama.cpp's adapter files (``save_adapter`` / ``load_adapter``), judged by
llama-cpp-python 0.3.36: the base file with ``lora_path`` gives the logits pyggml_opt gives with the
adapters (float32 key / value cache: what pyggml_opt computes in; measured max |difference| / max
|logit| ~1e-4 on an F32 base, the issue's bound 1e-3; F16 base likewise), adapters of different scales
(rsLoRA, other alphas) included; the file loads back onto the base bit for bit; bad files and models
are refused before anything changes."""
from __future__ import annotations

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import GGUFFile
from pyggml_opt.data import CharTokenizer
from support import import_or_skip

llama_cpp = import_or_skip("llama_cpp", "llama.cpp judges the adapter files")

TOK = CharTokenizer("abcdefghijklmnopqrstuvwxyz .,")
TEXT = "the cat sat on the mat, and the dog"


@pytest.fixture(scope="module")
def base_file(tmp_path_factory):
    """A llama saved for llama.cpp with its tokenizer (F32), and the same model with F16 matrices."""
    folder = tmp_path_factory.mktemp("lora")
    m = pgo.models.llama(TOK.vocab_size, 48, 32, 2, 4, n_kv_heads=2, ffn_dim=48)
    m.build((48,), seed=3)
    paths = {"f32": folder / "base-f32.gguf", "f16": folder / "base-f16.gguf"}
    m.save(paths["f32"], tokenizer=TOK)
    m.save(paths["f16"], tokenizer=TOK, quantize="f16")
    return paths


def adapted(path, seed=1):
    """The base with adapters of two scales: rank 4 alpha 8 on attention, rsLoRA rank 2 alpha 3 on the
    MLP; B at random (as trained)."""
    m = pgo.load(path)
    m.enable_lora(rank=4, alpha=8, targets=["attn_q", "attn_k", "attn_v", "attn_output"], seed=seed)
    m.enable_lora(rank=2, alpha=3, rslora=True, targets=["ffn_gate", "ffn_up", "ffn_down"], seed=seed)
    rng = np.random.default_rng(seed)
    m.set_weights({k: rng.normal(0, 0.2, v.shape).astype(np.float32) for k, v in m.get_weights().items()
                   if k.endswith(".lora_b")})
    return m


def llama_cpp_logits(base, adapter, ids):
    llm = llama_cpp.Llama(str(base), lora_path=None if adapter is None else str(adapter), n_ctx=48, logits_all=True,
                          type_k=0, type_v=0, n_threads=1, verbose=False)
    try:
        llm.eval([int(i) for i in ids])
        return np.array(llm.scores[:len(ids)])
    finally:
        llm.close()


@pytest.mark.parametrize("kind", ["f32", "f16"])
def test_llama_cpp_applies_the_adapter_as_pyggml_opt_computes_it(base_file, kind, tmp_path):
    m = adapted(base_file[kind])
    adapter = tmp_path / "adapter.gguf"
    m.save_adapter(adapter)
    ids = np.array(TOK.encode(TEXT), np.int32)
    ours = m.predict(ids[None], logits=True)[0]
    theirs = llama_cpp_logits(base_file[kind], adapter, ids)
    plain = pgo.load(base_file[kind]).predict(ids[None], logits=True)[0]
    assert np.abs(plain - ours).max() > 0.1  # the adapter changes the logits
    assert np.abs(ours - theirs).max() <= 1e-3 * np.abs(theirs).max()
    with GGUFFile.read(adapter) as f:
        assert (f.get("general.type"), f.get("adapter.type"), f.get("general.architecture")) == ("adapter", "lora", "llama")
        assert f.get("adapter.lora.alpha") == pytest.approx(8.0)
        assert f.tensor_shape("blk.0.attn_q.weight.lora_a") == (4, 32) and f.tensor_shape("blk.1.ffn_down.weight.lora_b") == (32, 2)


def test_an_adapter_file_loads_back_onto_its_base(base_file, tmp_path):
    m = adapted(base_file["f32"], seed=4)
    adapter = tmp_path / "adapter.gguf"
    m.save_adapter(adapter)
    other = pgo.load(base_file["f32"])
    assert sorted(other.load_adapter(adapter)) == sorted(p for p in pgo.nn.lora.lora_settings(m))
    x = np.array([TOK.encode(TEXT)], np.int32)
    np.testing.assert_allclose(other.predict(x, logits=True), m.predict(x, logits=True), rtol=0, atol=1e-5)
    assert other.frozen() == {n for n in other.param_shapes if ".lora_" not in n}  # ready to train further


def test_a_merged_model_runs_in_llama_cpp_as_base_plus_adapter(base_file, tmp_path):
    """merge_lora folds W + scale B A into the weights: the model computes what it did with the adapters
    (float32 rounding), and its file (F32; F16 and Q8_0 when asked) runs in llama.cpp as the base file
    with the adapter file does (F32: the adapter bound 1e-3; F16 / Q8_0: their own rounding, the bounds
    of tests/integration/test_gguf_models.py, 1e-3 / 2e-2, against pyggml_opt reading the same file)."""
    m = adapted(base_file["f32"], seed=5)
    adapter = tmp_path / "adapter.gguf"
    m.save_adapter(adapter)
    ids = np.array(TOK.encode(TEXT), np.int32)
    with_adapter = m.predict(ids[None], logits=True)[0]
    assert sorted(m.merge_lora()) == sorted(f"blk{i}.{p}" for i in (0, 1) for p in (
        "attn.wq", "attn.wk", "attn.wv", "attn.wo", "ffn.w_gate", "ffn.w_up", "ffn.w_down"))
    assert not any(".lora_" in n for n in m.param_shapes)
    np.testing.assert_allclose(m.predict(ids[None], logits=True)[0], with_adapter, rtol=0, atol=1e-5)
    theirs = llama_cpp_logits(base_file["f32"], adapter, ids)
    for quantize, bound in ((None, 1e-3), ("f16", 1e-3), ("q8_0", 2e-2)):
        merged = tmp_path / f"merged-{quantize}.gguf"
        m.save(merged, tokenizer=TOK, quantize=quantize)
        got = llama_cpp_logits(merged, None, ids)
        reference = theirs if quantize is None else pgo.load(merged).predict(ids[None], logits=True)[0]
        assert np.abs(got - reference).max() <= bound * np.abs(reference).max(), quantize
    with pytest.raises(ValueError, match="no LoRA adapters to merge"):
        m.merge_lora()


def test_llama_cpp_applies_a_gemma3_adapter_as_pyggml_opt_computes_it(tmp_path):
    """Gemma 3 (sliding-window and global blocks, norms around attention and MLP, GeGLU): an adapter on
    every projection, trained a few steps, saved as llama.cpp's adapter file and applied by llama.cpp
    to the base; bound: the adapter's 1e-3 plus llama.cpp's float16-table GELU (3e-3, see
    test_gguf_models.py)."""
    m = pgo.models.gemma3(TOK.vocab_size, 48, 32, 3, 4, 2, 48, 16, sliding_window=6, sliding_pattern=3)
    m.build((48,), seed=3)
    base = tmp_path / "gemma3.gguf"
    m.save(base, tokenizer=TOK)
    m = pgo.load(base)
    assert len(m.enable_lora(rank=4, alpha=8, seed=0)) == 3 * 7
    ids = np.array(TOK.encode(TEXT), np.int32)
    x = np.stack([np.roll(ids, -i)[:32] for i in range(4)])
    m.fit(x, np.roll(x, -1, axis=1), epochs=5, batch_size=2, optimizer=pgo.AdamW(lr=3e-2), verbose=0)
    adapter = tmp_path / "adapter.gguf"
    m.save_adapter(adapter)
    ours = m.predict(ids[None], logits=True)[0]
    theirs = llama_cpp_logits(base, adapter, ids)
    plain = pgo.load(base).predict(ids[None], logits=True)[0]
    assert np.abs(plain - ours).max() > 0.1  # the adapter changes the logits
    assert np.abs(ours - theirs).max() <= 4e-3 * np.abs(theirs).max()


def test_bad_adapter_files_and_models_are_refused(base_file, tmp_path):
    m = adapted(base_file["f32"])
    adapter = tmp_path / "adapter.gguf"
    m.save_adapter(adapter)
    with GGUFFile.read(adapter) as f:
        keys = {k: f.get_typed(k) for k in f.keys()}
        tensors = {n: f.tensor(n, 2) for n in f.tensor_names()}

    def rewritten(name, keys=keys, tensors=tensors):
        with GGUFFile() as g:
            for k, v in keys.items():
                g.set(k, v)
            for n, t in tensors.items():
                g.add_tensor(n, t)
            g.write(tmp_path / name)
        return tmp_path / name

    fresh = lambda: pgo.load(base_file["f32"])  # noqa: E731
    cases = [
        (base_file["f32"], "is not a LoRA adapter"),
        (rewritten("arch.gguf", keys={**keys, "general.architecture": "qwen2"}), "adapts a 'qwen2' model, this one is 'llama'"),
        (rewritten("lone.gguf", tensors={k: v for k, v in tensors.items() if k != "blk.0.attn_q.weight.lora_b"}),
         "has no 'blk.0.attn_q.weight.lora_b'"),
        (rewritten("extra.gguf", tensors={**tensors, "blk.9.attn_q.weight.lora_a": tensors["blk.0.attn_q.weight.lora_a"]}),
         "tensor 'blk.9.attn_q.weight.lora_a' adapts nothing this model has"),
        (rewritten("shape.gguf", tensors={**tensors, "blk.0.attn_q.weight.lora_a": np.zeros((4, 31), np.float32)}),
         r"'blk.0.attn_q.weight''s adapter is \(4, 31\)"),
    ]
    for path, message in cases:
        model = fresh()
        with pytest.raises(ValueError, match=message):
            model.load_adapter(path)
        assert not model.frozen() and not pgo.nn.lora.lora_settings(model)  # unchanged
    with pytest.raises(ValueError, match="the model has no LoRA adapters"):
        fresh().save_adapter(tmp_path / "none.gguf")
    with pytest.raises(ValueError, match="holds a base model, not LoRA adapters: save_adapter"):
        m.save(tmp_path / "whole.gguf")
    gpt = pgo.models.gpt(TOK.vocab_size, 16, 16, 1, 2, head_bias=False)
    gpt.enable_lora(rank=2, targets="attn_q")
    with pytest.raises(ValueError, match="stores 'blk0.attn.wq' fused with other tensors"):
        gpt.save_adapter(tmp_path / "gpt.gguf")
