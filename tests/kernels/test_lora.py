"""LoRA (``Model.enable_lora``, ``Linear``'s adapters) on float32 bases: the adapted model starts as the
base, computes W x + scale B A x (alpha / rank, rsLoRA alpha / sqrt(rank)) against a float64 numpy
llama with merged weights, its adapter gradients match central finite differences of that reference,
``fit`` trains the adapters alone (the base bit for bit unchanged) on Debian's fortunes, and the adapters
are part of the configuration (pickle, copy, save / load, a checkpoint resumed exactly)."""
import copy
import pickle

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.data import CharTokenizer
from pyggml_opt.models.lm import LLAMA
from support import FAST, check_gradients, fortunes_or_skip
from support.llama_numpy import llama_logits

TOK = CharTokenizer("abcdefghijklmnopqrstuvwxyz .,")
V, T, D, H, KV = TOK.vocab_size, 10, 16, 4, 2
KEYS = {"llama.attention.head_count": H, "llama.attention.head_count_kv": KV, "llama.block_count": 2,
        "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.rope.freq_base": 500.0}
ALL = ["attn.wq", "attn.wk", "attn.wv", "attn.wo", "ffn.w_gate", "ffn.w_up", "ffn.w_down"]


def small_llama(seed=0):
    m = pgo.models.llama(V, T, D, 2, H, n_kv_heads=KV, ffn_dim=24, rope_theta=500.0)
    m.build((T,), seed=seed)
    return m


def tokens(n=3, seed=0):
    return np.random.default_rng(seed).integers(0, V, (n, T))


def merged_logits(w, x, scale):
    """float64 logits of the llama whose adapted weights are W + scale B A (the reference)."""
    base = {k: np.asarray(v, np.float64) for k, v in w.items() if ".lora_" not in k}
    for name in [k for k in w if k.endswith(".lora_a")]:
        layer = name[:-len(".lora_a")]
        base[f"{layer}.weight"] = base[f"{layer}.weight"] + scale * np.asarray(w[f"{layer}.lora_b"], np.float64) @ \
            np.asarray(w[name], np.float64)
    t = LLAMA.tensors.to_file(base)
    return np.stack([llama_logits(KEYS, t, ids) for ids in x])


def with_random_b(m, seed=1):
    """B drawn at random (PEFT starts it at zero, where A's gradient is zero too)."""
    rng = np.random.default_rng(seed)
    m.set_weights({k: rng.normal(0, 0.3, v.shape).astype(np.float32) for k, v in m.get_weights().items()
                   if k.endswith(".lora_b")})


def test_an_adapted_model_starts_as_its_base_and_adds_scaled_b_a():
    m = small_llama()
    x = tokens()
    before = m.predict(x, logits=True)
    assert m.enable_lora(rank=3, alpha=6, seed=0) == [f"blk{i}.{p}" for i in (0, 1) for p in ALL]
    np.testing.assert_array_equal(m.predict(x, logits=True), before)  # B = 0
    w = m.get_weights()
    a = w["blk0.attn.wq.lora_a"]
    assert a.shape == (3, D) and np.abs(a).max() <= 1 / np.sqrt(D) and a.std() > 0.5 / np.sqrt(3 * D)  # U(+-1/sqrt(in))
    assert not np.any(w["blk1.ffn.w_down.lora_b"]) and w["blk1.ffn.w_down.lora_b"].shape == (D, 3)
    assert m.frozen() == {n for n in w if ".lora_" not in n}
    with_random_b(m)
    # float32 through 2 blocks against float64: measured max |difference| ~5e-7
    np.testing.assert_allclose(m.predict(x, logits=True), merged_logits(m.get_weights(), x, 6 / 3), rtol=0, atol=3e-6)


def test_rslora_scales_by_alpha_over_the_root_of_the_rank():
    m = small_llama(seed=2)
    m.enable_lora(rank=4, alpha=4, rslora=True, targets=["q_proj", "ffn_down"])
    with_random_b(m, seed=3)
    x = tokens(seed=4)
    np.testing.assert_allclose(m.predict(x, logits=True), merged_logits(m.get_weights(), x, 4 / np.sqrt(4)), rtol=0,
                               atol=3e-6)


def test_adapter_gradients_match_finite_differences():
    """One SGD step of lr 1 moves each adapter by its gradient; the base does not move at all."""
    m = small_llama(seed=5)
    m.enable_lora(rank=2, alpha=4, seed=5)
    with_random_b(m, seed=6)
    x = tokens(4, seed=7)
    y = (x * 3 + 1) % V
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    m.fit(x, y, epochs=1, batch_size=len(x), shuffle=False, optimizer=pgo.SGD(lr=1.0), **FAST)
    w1 = m.get_weights()
    assert all(np.array_equal(w1[k], w0[k].astype(np.float32)) for k in w0 if ".lora_" not in k)
    got = {k: w0[k] - w1[k] for k in w0}

    def loss(w):
        z = merged_logits(w, x, 4 / 2)
        z = z - z.max(axis=-1, keepdims=True)
        lsm = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        return float(-np.take_along_axis(lsm, y[..., None], axis=-1).mean())

    names = [f"blk{i}.{p}.lora_{ab}" for i in (0, 1) for p in ALL for ab in "ab"]
    check_gradients(loss, w0, got, names, eps=1e-6, tol=2e-6)


def test_fit_trains_the_adapters_alone_on_fortunes():
    """A llama trained briefly on fortunes, then adapted (rank 4, all-linear) and trained on other
    fortunes: the held-out loss falls, the base stays bit for bit."""
    fortunes_or_skip()
    texts, _, _ = pgo.data.load_fortunes()
    tok, x, y = pgo.data.char_windows(texts[:1000], 32)  # 5,000 windows
    m = pgo.models.llama(tok.vocab_size, 32, 32, 1, 4)
    m.fit(x[:1024], y[:1024], epochs=1, batch_size=32, optimizer=pgo.AdamW(lr=3e-3), seed=0, **FAST)
    base = m.get_weights()
    m.enable_lora(rank=4, alpha=8, seed=0)
    held_x, held_y = x[-256:], y[-256:]
    before = m.evaluate(held_x, held_y, n_threads=1)[0]
    history = m.fit(x[1024:3072], y[1024:3072], epochs=1, batch_size=32, optimizer=pgo.AdamW(lr=1e-2), seed=0, **FAST)
    after = m.evaluate(held_x, held_y, n_threads=1)[0]
    assert after < before - 0.05, (before, after, history.history["loss"])
    now = m.get_weights()
    assert all(np.array_equal(now[k], v) for k, v in base.items())


def test_adapters_are_part_of_the_configuration(tmp_path):
    m = small_llama(seed=8)
    m.enable_lora(rank=2, alpha=3, targets=["attn_v", "up_proj"], dropout=0.2, seed=1)
    with_random_b(m, seed=9)
    x = tokens(seed=10)
    want = m.predict(x, logits=True)  # dropout acts in training only
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), pgo.load(_saved(m, tmp_path))):
        np.testing.assert_array_equal(other.predict(x, logits=True), want)
        assert other.frozen() == m.frozen() and other.get_config() == m.get_config()
    assert m.get_config()["lora"]["blk1.ffn.w_up"] == {"rank": 2, "alpha": 3.0, "dropout": 0.2, "rslora": False}


def _saved(m, tmp_path):
    path = tmp_path / "adapted.gguf"
    m.save(path)
    return path


def test_a_checkpointed_lora_fit_resumes_exactly(tmp_path):
    x = tokens(32, seed=11)
    y = (x * 5 + 2) % V

    def adapted():
        m = small_llama(seed=12)
        m.enable_lora(rank=2, alpha=4, dropout=0.1, seed=3)
        return m

    kw = dict(batch_size=8, optimizer=pgo.AdamW(lr=1e-2), seed=0, **FAST)
    whole = adapted()
    whole.fit(x, y, epochs=4, **kw)
    ckpt = tmp_path / "lora.ckpt.gguf"
    adapted().fit(x, y, epochs=2, callbacks=[pgo.ModelCheckpoint(ckpt)], **kw)
    resumed = adapted()
    resumed.fit(x, y, epochs=4, resume_from=ckpt, **kw)
    for k, v in whole.get_weights().items():
        np.testing.assert_array_equal(resumed.get_weights()[k], v, err_msg=k)


def test_bad_targets_ranks_and_settings_are_refused_before_anything_changes():
    m = small_llama()
    config = m.get_config()
    with pytest.raises(ValueError, match=r"LoRA target 'lm_head' names no Linear layer of this model; it has \[.*'blk0.attn.wq'"):
        m.enable_lora(targets="lm_head")
    with pytest.raises(ValueError, match=r"rank must be an int in \[1, 16\] for layer 'blk0.attn.wq'"):
        m.enable_lora(rank=17)
    with pytest.raises(ValueError, match="lora_dropout"):
        m.enable_lora(rank=2, dropout=1.0)
    with pytest.raises(ValueError, match="lora_alpha"):
        m.enable_lora(rank=2, alpha=-1.0)
    with pytest.raises(TypeError, match="targets must be a name or a list of names"):
        m.enable_lora(targets=[3])
    assert m.get_config() == config and not m.frozen()
    m.enable_lora(rank=2, targets="attn_q")
    with pytest.raises(ValueError, match="layer 'blk0.attn.wq' has an adapter already"):
        m.enable_lora(rank=2, targets="q_proj")
