"""Hostile input to the language-model surface (issue 30's "Bad input"), each case one that aborted,
hung, allocated without bound, gave silent garbage or an error that did not name the problem before:
the builders' arguments, generate's (tokenizers of another vocabulary, stop lists, seeds, ragged
batches, a stream's thread using the model between tokens), save's extra keys, llama.cpp files whose
keys lie about their tensors, and the tokenizers' constructors."""
import threading

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import GGUFFile
from pyggml_opt.data import CharTokenizer

TOK = CharTokenizer("abcdefghij")
V, T = TOK.vocab_size, 8
P = np.array([2, 3, 4], np.int32)


@pytest.fixture(scope="module")
def lm():
    return pgo.models.llama(V, T, 8, 1, 2)


@pytest.mark.parametrize("builder", [pgo.models.gpt, pgo.models.llama])
def test_builders_bound_the_context_and_take_bools_only(builder):
    # a gpt's position table of 2**40 rows was a 64 TiB MemoryError; 'no' built an output bias
    for context in (0, 2**20 + 1, 2**40):
        with pytest.raises(ValueError, match=r"context must be an int in \[1, 1048576\]"):
            builder(V, context, 8, 1, 2)
    with pytest.raises(TypeError, match="tie_embeddings must be True or False, got 'no'"):
        builder(V, T, 8, 1, 2, tie_embeddings="no")
    with pytest.raises(TypeError, match="head_bias must be True or False, got None"):
        pgo.models.gpt(V, T, 8, 1, 2, head_bias=None)
    assert builder(V, T, 8, 1, 2, tie_embeddings=np.bool_(True)).tied
    with pytest.raises(TypeError, match="build must be True or False, got 0"):
        builder(V, T, 8, 1, 2, build=0)


@pytest.mark.parametrize("builder", [pgo.models.gpt, pgo.models.llama])
def test_builders_without_build_make_no_weights(builder):
    """build=False: the architecture alone, filled by build_with_weights with the arrays given (as a
    file's loading does: no random weights first)."""
    unbuilt = builder(V, T, 8, 1, 2, build=False)
    assert not unbuilt.built and unbuilt.loss == "cross_entropy"
    with pytest.raises(ValueError, match="not built"):
        unbuilt.get_weights()
    reference = builder(V, T, 8, 1, 2)
    unbuilt.build_with_weights((T,), reference.get_weights())
    x = np.arange(2 * T, dtype=np.int32).reshape(2, T) % V
    np.testing.assert_array_equal(unbuilt.predict(x), reference.predict(x))


def test_generate_refuses_a_tokenizer_of_another_vocabulary(lm):
    # a smaller one failed after sampling (or returned ids it could not decode), a larger one embedded
    # ids the model lacks
    for other in (CharTokenizer("abcde"), CharTokenizer("abcdefghijklmnop")):
        with pytest.raises(ValueError, match=f"the tokenizer has {other.vocab_size} ids, the model {V}"):
            lm.generate("abc", 3, tokenizer=other)
        with pytest.raises(ValueError, match="one vocabulary size"):
            lm.generate(P, 3, tokenizer=other, stream=True)
    with pytest.raises(TypeError, match="tokenizer must have encode and decode .* got str"):
        lm.generate("abc", 3, tokenizer="abc")  # was LookupError: unknown encoding: abc


def test_a_file_whose_tokenizer_and_embedding_disagree_is_refused(lm, tmp_path):
    """A llama.cpp file whose tokenizer has fewer tokens than its token embedding has rows (an id past
    the tokenizer's, or past the table the other way round) is a ValueError naming both sizes."""
    good = tmp_path / "good.gguf"
    lm.save(good, tokenizer=TOK)
    with GGUFFile.read(good) as f:
        keys = {k: f.get_typed(k) for k in f.keys()}
        tensors = {n: f.weight(n) for n in f.tensor_names()}
    bad = tmp_path / "bad.gguf"
    with GGUFFile() as g:
        for k, v in keys.items():
            g.set(k, keys["tokenizer.ggml.tokens"][:-2] if k == "tokenizer.ggml.tokens" else v)
        for n, w in tensors.items():
            g.add_tensor(n, w)
        g.write(bad)
    with pytest.raises(ValueError, match=rf"its tokenizer has {V - 2} tokens, its token embedding {V} rows"):
        pgo.load(bad)


def test_generate_checks_stop_seed_and_batches(lm):
    greedy = lm.generate(P, 4, temperature=0)
    np.testing.assert_array_equal(lm.generate(P, 4, temperature=0, stop=None), greedy)  # None: no stop
    stop_at = int(greedy[4])
    assert lm.generate(P, 4, temperature=0, stop=np.array([stop_at])).tolist() == greedy[:5].tolist()
    assert lm.generate(P, 4, temperature=0, stop=[stop_at, stop_at, "j"], tokenizer=TOK).tolist() == greedy[:5].tolist()
    for stop, err, match in [(b"ab", TypeError, "got bytes"),  # was: stop ids 97 and 98
                             (1.0, TypeError, "got float"), ({1: "a"}, TypeError, "got dict"),
                             ([1, None], TypeError, "got None in"), (-1, ValueError, r"stop id -1 is outside .*\[0, 12\)"),
                             ([V], ValueError, "stop id 12 is outside"), ("", ValueError, "must not be empty")]:
        with pytest.raises(err, match=match):
            lm.generate(P, 3, stop=stop, tokenizer=TOK)
    for seed in (-1, 1.5, "a", True, [1, 2], np.random.default_rng(0)):
        with pytest.raises(ValueError, match="seed must be an int >= 0"):
            lm.generate(P, 3, seed=seed)
    assert lm.generate(P, 3, seed=np.int64(2**40)).shape == (6,)
    with pytest.raises(ValueError, match="prompts of a batch must have one length"):
        lm.generate([[2, 3], [2, 3, 4]], 3)


def test_a_streams_thread_cannot_free_the_model_between_tokens(lm):
    x = np.zeros((2, T), np.int32)
    whole = lm.generate(P, 6, seed=0)[3:].tolist()
    stream = lm.generate(P, 6, seed=0, stream=True)
    first = [next(stream)]
    # was: ClosedError "this tensor's graph context is closed" at the next token
    for use, what in [(lm.close, "close"), (lambda: lm.build((T,)), "build"), (lambda: lm.fit(x, x, **QUIET), "fit")]:
        with pytest.raises(RuntimeError, match=f"cannot {what} the model while a generate stream is open"):
            use()
    lm.predict(x)  # the same weights and backend: allowed
    assert first + list(stream) == whole
    stream = lm.generate(P, 6, seed=0, stream=True)
    next(stream)
    stream.close()  # closed early: the model is free again, in this thread and in another
    lm.fit(x, x, **QUIET)
    out = []
    other = threading.Thread(target=lambda: out.append(lm.generate(P, 2, seed=0)))
    other.start()
    other.join(60)
    assert not other.is_alive() and out[0].shape == (5,)
    lm.close()


QUIET = dict(epochs=1, verbose=0, n_threads=1)


def test_save_refuses_extra_keys_it_writes_itself(lm, tmp_path):
    for key in ("llama.block_count", "tokenizer.ggml.model", "general.architecture", "pyggml_opt.config"):
        with pytest.raises(ValueError, match=f"extra key '{key}' is one save writes itself"):
            lm.save(tmp_path / "x.gguf", tokenizer=TOK, extra={key: 5})
    assert not (tmp_path / "x.gguf").exists()
    lm.save(tmp_path / "x.gguf", tokenizer=TOK, extra={"general.name": "mine"})
    assert pgo.saving.load_metadata(tmp_path / "x.gguf")["general.name"] == "mine"


def test_a_model_without_blocks_is_refused_for_what_it_lacks(tmp_path):
    # was "layer 0 (Embedding ...) does not map", a layer that does
    bare = pgo.Sequential([pgo.layers.Embedding(V, 8, name="tok"), pgo.layers.Linear(8, V, bias=False, name="head")],
                          input_shape=(T,))
    with pytest.raises(ValueError, match="gpt2: it has no blocks: .*; llama: it has no blocks: a llama is made of Embedding, "
                                         "LlamaBlock, RMSNorm, Linear"):
        bare.save(tmp_path / "x.gguf", tokenizer=TOK)


def rewrite(src, dst, keys=(), drop=()):
    """``src`` with ``keys`` set (ints as int64, floats as float64) and the keys ``drop`` removed."""
    with GGUFFile.read(src) as f:
        values = {}
        for k in f.keys():
            try:
                values[k] = f.get(k)
            except ValueError:  # an array
                values[k] = f.get_array(k)
        tensors = {n: f.tensor(n) for n in f.tensor_names()}
    values = {k: v for k, v in {**values, **dict(keys)}.items() if k not in drop}
    with GGUFFile() as g:
        for k, v in values.items():
            g.set(k, v)
        for n, v in tensors.items():
            g.add_tensor(n, v)
        g.write(dst)


OWN = "pyggml_opt.hyperparameters"  # pyggml_opt's exact values, which would otherwise win


@pytest.mark.parametrize("arch, key, value, match", [
    # each built for minutes or allocated GiBs before
    ("llama", "block_count", 10**6, "llama.block_count is 1000000, its tensors are of 2 blocks"),
    ("llama", "vocab_size", 2**31, r"token_embd.weight is \(12, 8\), its hyperparameters make it \(2147483648, 8\)"),
    ("llama", "feed_forward_length", 2**30, r"blk.0.ffn_up.weight is \(32, 8\)"),
    ("llama", "embedding_length", 16, r"token_embd.weight is \(12, 8\), its hyperparameters make it \(12, 16\)"),
    ("gpt2", "block_count", 10**6, "gpt2.block_count is 1000000"),
    ("gpt2", "context_length", 2**20, r"position_embd.weight is \(8, 8\), its hyperparameters make it \(1048576, 8\)"),
    ("llama", "attention.value_length", 16, "lacks: \\['llama.attention.value_length'\\]"),  # loaded before
])
def test_llama_cpp_files_whose_keys_lie_are_refused_before_building(tmp_path, arch, key, value, match):
    model = (pgo.models.llama(V, T, 8, 2, 2) if arch == "llama" else pgo.models.gpt(V, T, 8, 2, 2, head_bias=False))
    model.save(tmp_path / "m.gguf", tokenizer=TOK)
    rewrite(tmp_path / "m.gguf", tmp_path / "bad.gguf", {f"{arch}.{key}": value}, drop=[OWN])
    with pytest.raises(ValueError, match=match):
        pgo.load(tmp_path / "bad.gguf")


def test_a_vocabulary_shorter_than_the_embedding_is_refused(tmp_path):
    pgo.models.llama(V, T, 8, 1, 2).save(tmp_path / "m.gguf", tokenizer=TOK)
    short = {"tokenizer.ggml.tokens": ["<pad>", "\ufffd", "a"], "tokenizer.ggml.token_type": np.array([3, 4, 1], np.int32),
             "tokenizer.ggml.scores": np.zeros(3, np.float32)}
    rewrite(tmp_path / "m.gguf", tmp_path / "bad.gguf", short)  # loaded before, llama.cpp cannot
    with pytest.raises(ValueError, match="its tokenizer has 3 tokens, its token embedding 12 rows"):
        pgo.load(tmp_path / "bad.gguf")
    # other tools write the head size as key / value lengths: the same model
    rewrite(tmp_path / "m.gguf", tmp_path / "kv.gguf", {"llama.attention.key_length": 4, "llama.attention.value_length": 4})
    assert pgo.load(tmp_path / "kv.gguf").get_config() == pgo.load(tmp_path / "m.gguf").get_config()


def test_tokenizer_constructors_take_what_they_say():
    with pytest.raises(TypeError, match="chars must be a str"):
        CharTokenizer(["ab", "c"])  # was a tokenizer whose llama.cpp file load_vocab refused
    with pytest.raises(TypeError, match="chars must be a str .* got int"):
        CharTokenizer(5)
    with pytest.raises(ValueError, match="length must be an int >= 1, got True"):
        TOK.encode("ab", True)
    with pytest.raises(TypeError, match="expected a sequence of texts .* got int"):
        CharTokenizer.fit(5)
    with pytest.raises(ValueError, match="no character tokenizer"):
        CharTokenizer.from_metadata(None)
