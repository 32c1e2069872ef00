"""generate with a key/value cache (nn.decoding): the cached graphs' logits against the full forward
(gpt with learned and rotary positions, llama with grouped-query attention), greedy generation against
per-token predict, top_p, seeds, streaming, stop ids / strings, bad input."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt.core import Backend, Scheduler
from pyggml_opt.data import CharTokenizer
from pyggml_opt.nn.decoding import KV_BLOCK, PROMPT_CHUNK, DecodeGraph, KVCache, decoding_layers, kv_rows
from pyggml_opt.training.generation import sample
from support import greedy_by_predict

V = 11
CONTEXT = KV_BLOCK + 24  # one-step graphs over KV_BLOCK cached rows, then over all of them


MODELS = {"gpt": lambda: pgo.models.gpt(V, CONTEXT, 16, 2, 2),
          "gpt-rope": lambda: pgo.models.gpt(V, CONTEXT, 16, 1, 2, positions="rope"),
          "llama": lambda: pgo.models.llama(V, CONTEXT, 16, 2, 4, n_kv_heads=2)}


@pytest.fixture(scope="module", params=sorted(MODELS))
def lm(request):
    return MODELS[request.param]()


def cached_logits(m, ids, prompt_len):
    """Logits (n, T, vocab) of ``ids`` (n, T): the first ``prompt_len`` as one graph, then one step at a time."""
    layers = decoding_layers(m)
    backend = Backend("cpu", 1)
    store = m.params_on(backend)
    cache = KVCache(layers, ids.shape[0], CONTEXT, backend)
    scheduler = Scheduler([backend])
    graphs = {}
    out = []
    try:
        for start, stop in [(0, prompt_len)] + [(t, t + 1) for t in range(prompt_len, ids.shape[1])]:
            key = (stop - start, kv_rows(start, stop - start, CONTEXT))
            if key not in graphs:
                graphs[key] = DecodeGraph(m, layers, store, cache, *key)
            out.append(graphs[key].run(scheduler, ids[:, start:stop], start))
    finally:
        for g in graphs.values():
            g.close()
        scheduler.close()
        cache.close()
    return np.concatenate(out, axis=1)


@pytest.mark.parametrize("prompt_len", [1, 7, KV_BLOCK + 3])
def test_cached_logits_equal_the_full_forward(lm, prompt_len):
    ids = np.random.default_rng(prompt_len).integers(0, V, (2, CONTEXT)).astype(np.int32)
    full = lm.predict(ids, logits=True)
    got = cached_logits(lm, ids, prompt_len)
    assert got.shape == full.shape == (2, CONTEXT, V)
    # The same float32 products and sums, in other groupings (one step against the whole sequence; the
    # softmax over the cache's masked rows, which add exact zeros): a few float32 roundings per value.
    # Measured: at most 3.6e-7 of the largest logit (3 float32 epsilons) over these 9 cases.
    scale = np.abs(full).max()
    np.testing.assert_allclose(got, full, rtol=0, atol=2e-6 * scale)


def test_models_that_cannot_decode_are_recognised():
    assert decoding_layers(pgo.models.gpt(V, 8, 16, 1, 2)) is not None
    custom = pgo.Sequential([L.Embedding(V, 16), L.TransformerBlock(16, 2), L.GELU(), L.Linear(16, V)], input_shape=(8,))
    assert [prefix for prefix, _ in decoding_layers(custom)] == ["1.attn."]  # any Sequential of such layers
    np.testing.assert_array_equal(custom.generate([1, 2], 10, temperature=0), greedy_by_predict(custom, [1, 2], 10))
    masked = pgo.Sequential([L.Embedding(V, 16, mask_zero=True), L.TransformerBlock(16, 2), L.Linear(16, V)],
                            input_shape=(8,))
    assert decoding_layers(masked) is None  # a padding mask would hide cached steps of id 0
    bidirectional = pgo.Sequential([L.Embedding(V, 16), L.TransformerBlock(16, 2, causal=False), L.Linear(16, V)],
                                   input_shape=(8,))
    assert decoding_layers(bidirectional) is None


T = 8


@pytest.fixture(scope="module")
def trained():
    m = pgo.models.llama(V, T, 16, 2, 2, n_kv_heads=1)
    x = np.random.default_rng(0).integers(0, V, (64, T))
    m.fit(x, (x + 1) % V, epochs=3, batch_size=16, verbose=0, n_threads=1, seed=0)
    return m


@pytest.mark.parametrize("prompt_len", [1, 5, T, 12])  # T: the cache is full at once; 12 > context
def test_greedy_generation_equals_the_recomputed_one(trained, prompt_len):
    prompt = (np.arange(prompt_len) * 3) % V
    got = trained.generate(prompt, 14, temperature=0)  # past the context: the window slides
    np.testing.assert_array_equal(got, greedy_by_predict(trained, prompt, 14))


def test_a_prompt_longer_than_a_chunk_runs_in_chunks():
    # 532 prompt ids: graphs of 512 and 20 steps; past the context of 552 the window of 552 ids is
    # recomputed as 512 + 40 each token
    m = pgo.models.llama(V, PROMPT_CHUNK + 40, 16, 1, 2, n_kv_heads=1)
    prompt = np.random.default_rng(1).integers(0, V, PROMPT_CHUNK + 20)
    got = m.generate(prompt, 30, temperature=0, n_threads=1)
    np.testing.assert_array_equal(got, greedy_by_predict(m, prompt, 30))


def test_top_p_keeps_the_fewest_likely_ids():
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]]))
    rng = np.random.default_rng(0)
    draws = np.concatenate([sample(np.repeat(logits, 1000, 0), 1.0, None, rng, top_p=0.5) for _ in range(20)])
    freq = np.bincount(draws, minlength=4) / draws.size
    # 0.4 + 0.3 reach 0.5: those two, renormalised; 20000 draws, 4 standard errors (<= 0.0035 each)
    np.testing.assert_allclose(freq, [0, 0, 3 / 7, 4 / 7], atol=0.014)
    assert (sample(np.repeat(logits, 100, 0), 1.0, None, rng, top_p=0.35) == 3).all()  # 0.4 alone


def test_seeds_and_streaming(trained):
    a = trained.generate([1, 2], 20, top_p=0.8, seed=3)
    np.testing.assert_array_equal(a, trained.generate([1, 2], 20, top_p=0.8, seed=3))
    assert not np.array_equal(a, trained.generate([1, 2], 20, top_p=0.8, seed=4))
    streamed = list(trained.generate([1, 2], 20, top_p=0.8, seed=3, stream=True))
    assert streamed == a[2:].tolist() and all(type(t) is int for t in streamed)
    batch = trained.generate([[1, 2], [3, 4]], 5, seed=1)
    rows = list(trained.generate([[1, 2], [3, 4]], 5, seed=1, stream=True))
    assert len(rows) == 5 and all(r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(np.stack(rows, axis=1), batch[:, 2:])


def test_stop_ids_and_strings(trained):
    tok = CharTokenizer("abcdefghi")  # + padding and unknown: 11 ids
    assert tok.vocab_size == V
    full = trained.generate("ab", 12, temperature=0, tokenizer=tok)
    new = full[2:].tolist()
    stop_id = new[4]
    first = new.index(stop_id)
    np.testing.assert_array_equal(trained.generate("ab", 12, temperature=0, tokenizer=tok, stop=stop_id),
                                  full[:2 + first + 1])  # ends with the stop id, kept
    text = tok.decode(full[2:])
    target = text[5:7]
    cut = text.index(target)
    ids = trained.generate("ab", 12, temperature=0, tokenizer=tok, stop=[target])
    assert tok.decode(ids[2:]) == text[:cut + len(target)]
    pieces = list(trained.generate("ab", 12, temperature=0, tokenizer=tok, stop=[target], stream=True))
    assert "".join(pieces) == text[:cut] and all(pieces)
    assert "".join(trained.generate("ab", 12, temperature=0, tokenizer=tok, stream=True)) == text


def test_bad_input_is_refused(trained):
    for top_p in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="top_p"):
            trained.generate([1], 3, top_p=top_p)
    with pytest.raises(ValueError, match=r"\(L,\) or \(n, L\)"):
        trained.generate([], 3)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 11\)"):
        trained.generate([1, V], 3)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 11\)"):
        trained.generate([-1], 3)
    with pytest.raises(ValueError, match="stop strings need tokenizer"):
        trained.generate([1], 3, stop="a")
    with pytest.raises(ValueError, match="one prompt"):
        trained.generate([[1], [2]], 3, stop=1)
    with pytest.raises(TypeError, match="stop must be"):
        trained.generate([1], 3, stop=[1.5])
    with pytest.raises(TypeError, match="tokenizer"):
        trained.generate("ab", 3)


@pytest.mark.parametrize("steps", [1, 9])
def test_a_prompt_graph_computes_the_last_steps_logits_only(lm, steps):
    """generate's graphs (last_only): the output layers run on the last step alone, the logits equal the
    last step's of the graph of every step, bit for bit (the same products, fewer of them)."""
    layers = decoding_layers(lm)
    backend = Backend("cpu", 1)
    store = lm.params_on(backend)
    ids = np.random.default_rng(steps).integers(0, V, (2, steps)).astype(np.int32)
    out = []
    for last_only in (False, True):
        cache = KVCache(layers, 2, CONTEXT, backend)
        graph = DecodeGraph(lm, layers, store, cache, steps, kv_rows(0, steps, CONTEXT), last_only=last_only)
        scheduler = Scheduler([backend])
        out.append(graph.run(scheduler, ids, 0))
        for owner in (graph, scheduler, cache):
            owner.close()
    assert out[0].shape == (2, steps, V) and out[1].shape == (2, 1, V)
    np.testing.assert_array_equal(out[1][:, 0], out[0][:, -1])
