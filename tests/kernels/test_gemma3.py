"""pgo.models.gemma3 against a float64 numpy Gemma 3 (support/llama_numpy.py: embedding scaled by
sqrt(dim), norms before and after attention and the GELU-gated MLP, per-head query / key norms, local
sliding-window layers and global ones with their own rope bases): its forward pass at every length, its
KV-cache decoding past the window, its gradients by finite differences, LoRA on it, its llama.cpp file
and the files it refuses. transformers and llama.cpp judge converted files in
integration/test_gguf_models.py."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.models.lm import GEMMA3, Gemma3Args
from support import FAST, check_gradients, greedy_by_predict
from support.llama_numpy import gemma3_logits

TOK = pgo.data.CharTokenizer("abcdefghijklmnopqrstuvwxyz .")
V, T, D, H, KV, HEAD, FFN = TOK.vocab_size, 16, 16, 4, 2, 8, 24
WINDOW, PATTERN, LAYERS = 5, 3, 3  # blocks 0 and 1 local (window 5), block 2 global


def small_gemma(seed=0, **kw):
    m = pgo.models.gemma3(V, T, D, LAYERS, H, KV, FFN, HEAD, sliding_window=WINDOW, sliding_pattern=PATTERN,
                          rope_theta=1000.0, rope_local_theta=50.0, **kw)
    m.build((T,), seed=seed)
    rng = np.random.default_rng(seed + 1)  # norm weights away from one, so that each matters
    m.set_weights({k: rng.uniform(0.5, 1.5, v.shape).astype(np.float32) for k, v in m.get_weights().items()
                   if k.endswith("norm.weight")})
    return m


def keys(m):
    a = m.args
    return {"gemma3.attention.head_count": a.n_heads, "gemma3.attention.head_count_kv": a.n_kv_heads,
            "gemma3.attention.layer_norm_rms_epsilon": a.norm_eps, "gemma3.attention.key_length": a.head_dim,
            "gemma3.block_count": a.n_layers, "gemma3.rope.freq_base": a.rope_theta,
            "gemma3.rope.freq_base_swa": a.rope_local_theta, "gemma3.attention.sliding_window": a.sliding_window,
            "gemma3.attention.sliding_window_pattern": a.sliding_pattern}


def numpy_logits(m, x, weights=None):
    w = {k: np.asarray(v, np.float64) for k, v in (weights or m.get_weights()).items()}
    t = GEMMA3.tensors.to_file(w)
    return np.stack([gemma3_logits(keys(m), t, ids) for ids in x])


def tokens(n=2, steps=T, seed=0):
    return np.random.default_rng(seed).integers(0, V, (n, steps))


def test_layers_alternate_local_and_global_as_llama_cpp_counts_them():
    m = small_gemma()
    attn = [m.layers[1 + i].children["attn"] for i in range(LAYERS)]
    assert [a.window for a in attn] == [WINDOW, WINDOW, None] and [a.rope_base for a in attn] == [50.0, 50.0, 1000.0]
    args = Gemma3Args(V, T, D, 18, H, sliding_window=512)  # Gemma-3-270M's 18 layers: 5 and 11 and 17 global
    assert [i for i in range(18) if not args.is_local(i)] == [5, 11, 17]
    assert not any(Gemma3Args(V, T, D, 4, H, sliding_window=0).is_local(i) for i in range(4))
    assert m.count_params() == V * D + LAYERS * (4 * D + 2 * HEAD + 2 * H * HEAD * D + 2 * KV * HEAD * D + 3 * D * FFN) + D


@pytest.mark.parametrize("steps", [T, 7, 1])
def test_forward_matches_float64_numpy_at_any_length(steps):
    m = small_gemma()
    x = tokens(steps=steps)
    # float32 through 3 blocks of 6 norms each: measured max |difference| 1.5e-6 for logits up to 3
    np.testing.assert_allclose(m.predict(x, logits=True), numpy_logits(m, x), rtol=0, atol=2e-5)


def test_the_window_hides_what_it_leaves_behind():
    """Changing the first id changes a local-only model's logits at step WINDOW - 1 but not from step
    WINDOW * LAYERS on (each local layer reaches WINDOW - 1 steps further back)."""
    m = pgo.models.gemma3(V, T, D, 2, H, KV, FFN, HEAD, sliding_window=3, sliding_pattern=0)
    m.build((T,), seed=0)
    x = tokens(1)
    changed = x.copy()
    changed[0, 0] = (x[0, 0] + 1) % V
    diff = np.abs(m.predict(x, logits=True) - m.predict(changed, logits=True)).max(-1)[0]
    assert diff[4] > 1e-4 and np.all(diff[5:] == 0)


def test_decoding_with_the_cache_past_the_window_gives_the_same_tokens():
    m = small_gemma()
    prompt = tokens(1)[0, :3].astype(np.int32)
    assert np.array_equal(m.generate(prompt, 12, temperature=0), greedy_by_predict(m, prompt, 12))


def test_gradients_match_finite_differences():
    m = small_gemma()
    x, y = tokens(2, seed=1), tokens(2, seed=2)
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    m.fit(x, y, epochs=1, batch_size=len(x), shuffle=False, optimizer=pgo.SGD(lr=1.0), **FAST)
    got = {k: w0[k] - v for k, v in m.get_weights().items()}

    def loss(w):
        z = numpy_logits(m, x, w)
        z = z - z.max(axis=-1, keepdims=True)
        lsm = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        return float(-np.take_along_axis(lsm, y[..., None], axis=-1).mean())

    names = ["tok.weight", "blk0.attn.q_norm.weight", "blk0.post_attention_norm.weight", "blk1.ffn.w_gate.weight",
             "blk2.attn.wk.weight", "blk2.post_ffw_norm.weight", "norm.weight"]
    check_gradients(loss, w0, got, names, eps=1e-4, tol=2e-4)


def test_lora_trains_on_it_and_leaves_the_base():
    m = small_gemma()
    base = m.get_weights()
    assert len(m.enable_lora(rank=2, alpha=4, seed=0)) == 7 * LAYERS
    x, y = tokens(4, seed=3), tokens(4, seed=4)
    history = m.fit(x, y, epochs=3, batch_size=2, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert history.history["loss"][-1] < history.history["loss"][0]
    after = m.get_weights()
    assert all(np.array_equal(after[k], v) for k, v in base.items())


def test_saves_as_llama_cpps_gemma3_and_loads_as_the_same_model(tmp_path):
    m = small_gemma()
    m.save(tmp_path / "g.gguf", tokenizer=TOK)
    with pgo.core.GGUFFile.read(tmp_path / "g.gguf") as f:
        assert f.get("general.architecture") == "gemma3" and f.get("gemma3.attention.sliding_window") == WINDOW
        assert f.get("gemma3.attention.sliding_window_pattern") == PATTERN and f.get("gemma3.rope.freq_base_swa") == 50.0
        assert "output.weight" not in f.tensor_names() and f.tensor("blk.0.post_ffw_norm.weight").shape == (D,)
    back = pgo.load(tmp_path / "g.gguf")
    assert back.args == m.args
    x = tokens()
    np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))


def test_files_it_cannot_compute_are_refused(tmp_path):
    """A logit soft-cap, a missing norm, a per-layer pattern array, an architecture pyggml_opt lacks:
    ValueError naming it, before any layer."""
    m = small_gemma()
    m.save(tmp_path / "g.gguf", tokenizer=TOK)
    with pgo.core.GGUFFile.read(tmp_path / "g.gguf") as f:
        keys_ = {k: f.get_typed(k) for k in f.keys()}
    tensors = GEMMA3.tensors.to_file(m.get_weights())
    cases = {"final_logit_softcapping": ({"gemma3.final_logit_softcapping": np.float32(30.0)}, None),
             "post_ffw_norm": ({}, "blk.1.post_ffw_norm.weight"),
             "sliding_window_pattern": ({"gemma3.attention.sliding_window_pattern": np.array([1, 1, 0], np.uint8)},
                                        None),
             "unknown architecture 'gemma2' \\(known: .*gemma3": ({"general.architecture": "gemma2"}, None)}
    for what, (changed, dropped) in cases.items():
        with pgo.core.GGUFFile() as g:
            for k, v in {**keys_, **changed}.items():
                g.set(k, v)
            for name, value in tensors.items():
                if name != dropped:
                    g.add_tensor(name, value)
            g.write(tmp_path / "bad.gguf")
        with pytest.raises(ValueError, match=what):
            pgo.load(tmp_path / "bad.gguf")
    with pytest.raises(ValueError, match="sliding_window"):
        pgo.models.gemma3(V, T, D, 2, H, sliding_window=-1)
