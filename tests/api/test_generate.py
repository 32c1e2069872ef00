"""model.generate (against step-by-step predict, seeds, top-k, batches, long prompts, errors), the
sampler's distribution, the "pyggml-gpt" GGUF layout, and data.sliding_windows."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt.core import GGUFFile
from pyggml_opt.data import sliding_windows
from pyggml_opt.training.generation import sample
from support import greedy_by_predict

V, T = 13, 8


@pytest.fixture(scope="module")
def lm():
    m = pgo.models.gpt(V, T, 16, 2, 2)
    rng = np.random.default_rng(0)
    x = rng.integers(0, V, (64, T))
    m.fit(x, (x + 1) % V, epochs=3, batch_size=16, verbose=0, n_threads=1)  # logits with some structure
    return m


@pytest.mark.parametrize("prompt_len", [1, 5, 12])  # 12 > context: the window slides
def test_greedy_generation_matches_predict(lm, prompt_len):
    prompt = np.arange(prompt_len) % V
    got = lm.generate(prompt, 10, temperature=0)
    assert got.shape == (prompt_len + 10,) and got.dtype == np.int32
    np.testing.assert_array_equal(got, greedy_by_predict(lm, prompt, 10))
    np.testing.assert_array_equal(lm.generate(prompt, 10, top_k=1), got)  # top-1 sampling is greedy


def test_seeds_batches_and_zero_new_tokens(lm):
    prompts = np.array([[1, 2, 3], [4, 5, 6]])
    a = lm.generate(prompts, 20, seed=5)
    assert a.shape == (2, 23)
    np.testing.assert_array_equal(a[:, :3], prompts)
    np.testing.assert_array_equal(a, lm.generate(prompts, 20, seed=5))
    assert not np.array_equal(a, lm.generate(prompts, 20, seed=6))
    np.testing.assert_array_equal(lm.generate([7, 8], 0), [7, 8])
    assert ((0 <= a) & (a < V)).all()


def test_sampler_follows_the_softmax_within_the_top_k():
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]]))
    rng = np.random.default_rng(0)
    draws = np.concatenate([sample(np.repeat(logits, 1000, 0), 1.0, None, rng) for _ in range(20)])
    freq = np.bincount(draws, minlength=4) / draws.size
    # 20000 draws: the standard error of each frequency is <= 0.0035; 4 standard errors
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.014)
    top2 = np.concatenate([sample(np.repeat(logits, 1000, 0), 1.0, 2, rng) for _ in range(20)])
    freq2 = np.bincount(top2, minlength=4) / top2.size
    np.testing.assert_allclose(freq2, [0, 0, 3 / 7, 4 / 7], atol=0.014)
    cold = sample(np.repeat(logits, 1000, 0), 0.05, None, rng)  # T -> 0 approaches the argmax
    assert (cold == 3).mean() > 0.99


def test_generate_refuses_bad_input(lm):
    with pytest.raises(TypeError, match="integer token ids"):
        lm.generate(np.array([1.0, 2.0]), 3)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 13\)"):
        lm.generate([1, 13], 3)
    with pytest.raises(ValueError, match="top_k"):
        lm.generate([1], 3, top_k=V + 1)
    with pytest.raises(ValueError, match="temperature"):
        lm.generate([1], 3, temperature=-1.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.generate([1], -1)
    with pytest.raises(ValueError, match=r"\(L,\) or \(n, L\)"):
        lm.generate(np.zeros((1, 0), np.int64), 3)
    mlp = pgo.Sequential([L.Linear(4, 3)], input_shape=(4,))
    with pytest.raises(ValueError, match="needs a language model"):
        mlp.generate([1], 3)


def test_saved_gpt_has_its_layout_and_generates_the_same(lm, tmp_path):
    path = tmp_path / "lm.gguf"
    lm.save(path)
    with GGUFFile.read(path) as f:
        assert f.get("general.architecture") == "pyggml-gpt"
        assert (f.get("pyggml-gpt.vocab_size"), f.get("pyggml-gpt.context_length"), f.get("pyggml-gpt.embedding_length"),
                f.get("pyggml-gpt.block_count"), f.get("pyggml-gpt.attention.head_count"),
                f.get("pyggml-gpt.positions")) == (V, T, 16, 2, 2, "learned")
    loaded = pgo.load(path)
    assert loaded.loss == "cross_entropy"
    np.testing.assert_array_equal(loaded.generate([3, 1], 15, seed=2, top_k=5), lm.generate([3, 1], 15, seed=2, top_k=5))
    rope = pgo.models.gpt(V, T, 16, 1, 2, positions="rope")
    rope.save(tmp_path / "rope.gguf")
    again = pgo.load(tmp_path / "rope.gguf")
    x = np.arange(2 * T).reshape(2, T) % V
    np.testing.assert_array_equal(again.predict(x, logits=True), rope.predict(x, logits=True))
    other = pgo.Sequential([L.Embedding(V, 16), L.TransformerBlock(16, 2), L.Linear(16, V)], input_shape=(T,))
    other.save(tmp_path / "other.gguf")
    with GGUFFile.read(tmp_path / "other.gguf") as f:
        assert f.get("general.architecture") == "pyggml_opt"  # not a gpt: the generic layout


def test_sliding_windows():
    ids = np.arange(10)
    x, y = sliding_windows(ids, 4)
    np.testing.assert_array_equal(x, [[0, 1, 2, 3], [4, 5, 6, 7]])
    np.testing.assert_array_equal(y, [[1, 2, 3, 4], [5, 6, 7, 8]])
    x, y = sliding_windows(ids, 4, stride=3)
    assert x.shape == y.shape == (2, 4) and x.dtype == np.int32 and x.flags.c_contiguous
    np.testing.assert_array_equal(x[1], [3, 4, 5, 6])
    assert sliding_windows(ids, 9)[0].shape == (1, 9)
    with pytest.raises(ValueError, match="no window"):
        sliding_windows(ids, 10)
    with pytest.raises(TypeError, match="int token ids"):
        sliding_windows(np.ones(10), 3)
    with pytest.raises(ValueError, match="stride"):
        sliding_windows(ids, 3, stride=0)


@pytest.mark.parametrize("key, value", [("pyggml-gpt.block_count", 2**40), ("pyggml-gpt.vocab_size", 2**40),
                                        ("pyggml-gpt.context_length", 3), ("pyggml-gpt.positions", "alibi"),
                                        ("pyggml-gpt.attention.head_count", 3)])
def test_corrupt_gpt_hyperparameters_are_refused_before_building(tmp_path, key, value):
    pgo.models.gpt(V, T, 16, 1, 2).save(tmp_path / "good.gguf")
    with GGUFFile.read(tmp_path / "good.gguf") as f, GGUFFile() as bad:
        with pytest.raises(ValueError, match="cannot be written"):  # no tensor data in memory
            f.write(tmp_path / "bad.gguf")
        for k in f.keys():
            bad.set(k, value if k == key else f.get(k))
        for name in f.tensor_names():
            bad.add_tensor(name, f.tensor(name))
        bad.write(tmp_path / "bad.gguf")
    with pytest.raises(ValueError, match="corrupt pyggml-gpt"):
        pgo.load(tmp_path / "bad.gguf")


def test_sequences_longer_than_the_context_are_refused_by_name():
    m = pgo.models.gpt(V, T, 16, 1, 2)
    with pytest.raises(ValueError, match=r"sequences of 9 ids, longer than the model's context of 8"):
        m.fit(np.zeros((2, T + 1), int), np.zeros((2, T + 1), int), verbose=0)
    with pytest.raises(ValueError, match=r"sequences of 9 ids, longer than the model's context of 8"):
        m.predict(np.zeros((2, T + 1), int))
    with pytest.raises(TypeError, match="integer token ids"):
        m.predict(np.zeros((2, T)))


@pytest.mark.parametrize("make", [lambda: pgo.models.gpt(V, T, 16, 1, 2),
                                  lambda: pgo.models.llama(V, T, 16, 2, 4, 2, qkv_bias=True, rope_mode="neox")])
def test_predict_takes_any_length_up_to_the_context(make):
    # causal: the logits of the first t steps of a window are those of the window's prefix of t ids
    m = make()
    x = np.random.default_rng(0).integers(0, V, (3, T)).astype(np.int32)
    full = m.predict(x, logits=True)
    for t in (1, 3, T - 1):
        for _ in range(2):  # the first call's allocated graph, then the one cached for that length
            part = m.predict(x[:, :t], logits=True)
            assert part.shape == (3, t, V)
            np.testing.assert_allclose(part, full[:, :t], rtol=0, atol=1e-5)
