"""pgo.text.GGUFTokenizer against llama.cpp on real vocabularies: llama.cpp's own golden cases
(``models/ggml-vocab-<name>.gguf`` with ``.gguf.inp`` / ``.gguf.out``, from the llama-cpp-python 0.3.36
sdist that support/hf_models.py fetches once; the cases of its ``tests/test-tokenizer-0.cpp``:
``add_special`` and ``parse_special`` off) give the same ids, and llama-cpp-python (vocab_only) decodes
them to the same text; with ``parse_special`` and ``add_special`` the ids of texts holding special tokens
equal ``Llama.tokenize``'s. Every vocabulary of the sdist with golden cases whose tokenizer model
llama.cpp reads as SentencePiece (``llama``), byte-level BPE (``gpt2``) or Gemma 4's BPE: all but
``bert-bge`` (WordPiece, refused)."""
from __future__ import annotations

import ctypes
import inspect
import json

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.data.text import load_fortunes
from support import import_or_skip
from support.hf_models import llama_cpp_source

llama_cpp = import_or_skip("llama_cpp", "llama.cpp judges the tokenizer")
import_or_skip("tokenizers", "GGUFTokenizer runs byte-level BPE in Hugging Face tokenizers")

SPM_VOCABS = ("llama-spm", "phi-3")
BPE_VOCABS = ("llama-bpe", "qwen2", "qwen35", "gpt-2", "mpt", "deepseek-llm", "deepseek-coder", "falcon", "starcoder",
              "refact", "command-r", "gemma-4")
SEP = "\n__ggml_vocab_test__\n"


def golden_cases(name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's cases for vocabulary ``name``, read as test-tokenizer-0.cpp reads them."""
    models = llama_cpp_source() / "models"
    texts = (models / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split(SEP)
    if texts and texts[-1] == "":
        texts.pop()
    ids = [[int(t) for t in line.split()] for line in
           (models / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")[:len(texts)]]
    assert len(texts) == len(ids) > 10
    return list(zip(texts, ids))


def megabyte() -> str:
    """1 MB of real and mixed text: Debian's fortunes (English prose, verse, dialogue), source code
    (this package's Python, with its indentation runs), and a seeded stream of words from many
    scripts (CJK, Cyrillic, Arabic, Devanagari, Thai, Hangul, emoji with skin tones and joiners,
    combining accents, digits, punctuation runs, tabs and newlines)."""
    texts, _, _ = load_fortunes()
    prose = "\n%\n".join(texts)[:600_000]
    code = "".join(inspect.getsource(m) for m in (pgo.text.gguf_tokenizer, pgo.nn.network, pgo.core.gguf, json.decoder))
    rng = np.random.default_rng(0)
    scripts = ["的一是不了人我在有他这中大来上国个到说们", "привет мир съешь же ещё этих", "مرحبا بالعالم كيف حالك",
                 "नमस्ते दुनिया आप कैसे हैं", "สวัสดีชาวโลก", "안녕하세요 세계", "😀👍🏽👩‍💻🇫🇷❤️‍🔥", "éèàüñç̃ŝ",
                 "0123456789", "!?.,;:()[]{}<>'\"-_/\\@#$%^&*+=~`|", "\t\n\r   ", "Hello World THE the ll 've 's"]
    words = []
    for script, length, gap in zip(rng.integers(len(scripts), size=40_000), rng.integers(1, 9, size=40_000),
                                   rng.choice([" ", "", "\n", "  "], size=40_000)):
        chars = scripts[script]
        words.append("".join(chars[j] for j in rng.integers(len(chars), size=length)) + gap)
    text = prose + code[:150_000] + "".join(words)
    return text.encode()[:1_000_000].decode(errors="ignore")


@pytest.fixture(scope="module")
def mixed_text() -> str:
    return megabyte()


def detokenize(llm, ids, special: bool = False) -> str:
    """llama.cpp's own detokenizer (llama_detokenize, its space clean-up included; llama-cpp-python's
    Llama.detokenize joins the tokens' pieces without it), as text."""
    ids = [int(i) for i in ids]
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    buf = ctypes.create_string_buffer(64 * len(ids) + 16)
    n = llama_cpp.llama_detokenize(llm._model.vocab, arr, len(ids), buf, len(buf), False, special)
    assert n >= 0
    return buf.raw[:n].decode("utf-8", errors="replace")


@pytest.fixture(scope="module", params=SPM_VOCABS + BPE_VOCABS)
def vocab(request):
    path = llama_cpp_source() / "models" / f"ggml-vocab-{request.param}.gguf"
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    yield request.param, pgo.text.GGUFTokenizer.from_file(path), llm
    llm.close()


def test_golden_cases_give_llama_cpps_ids(vocab):
    name, tok, llm = vocab
    for text, ids in golden_cases(name):
        got = tok.encode(text, add_special=False)
        assert got.tolist() == ids, text
        assert tok.decode(got) == detokenize(llm, ids), text


def test_special_tokens_and_added_ids_as_llama_cpp(vocab):
    name, tok, llm = vocab
    specials = [t for t, kind in zip(tok.tokens, tok.types) if kind == 3][:4]  # control tokens
    text = f"{specials[0]}Hello world{specials[-1]} and {specials[0]}again <|not a token|>"
    for parse_special in (False, True):
        for add_special in (False, True):
            theirs = llm.tokenize(text.encode(), add_bos=add_special, special=parse_special)
            assert tok.encode(text, add_special, parse_special).tolist() == theirs, (parse_special, add_special)
    ids = tok.encode(text, parse_special=True)
    for special in (False, True):
        assert tok.decode(ids, special=special) == detokenize(llm, ids, special), special


def test_special_tokens_as_llama_cpp_settles_them(vocab):
    """Every token's attribute bits (control tokens found by their text included), the special ids and
    the end-of-generation set equal llama.cpp's (llama_vocab_get_attr / _is_eog / _bos ...)."""
    name, tok, llm = vocab
    v = llm._model.vocab
    attrs = np.array([llama_cpp.llama_vocab_get_attr(v, i) for i in range(tok.vocab_size)])
    np.testing.assert_array_equal(tok.attrs, attrs)
    assert tok.eog_ids == {i for i in range(tok.vocab_size) if llama_cpp.llama_vocab_is_eog(v, i)}
    for kind in ("bos", "eos", "eot", "sep", "pad", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"):
        theirs = getattr(llama_cpp, f"llama_vocab_{kind}")(v)
        assert tok.special_ids[kind] == (None if theirs < 0 else theirs), kind
    assert (tok.add_bos, tok.add_eos) == (llama_cpp.llama_vocab_get_add_bos(v), llama_cpp.llama_vocab_get_add_eos(v))


def test_a_megabyte_of_mixed_text_gives_llama_cpps_ids(vocab, mixed_text):
    name, tok, llm = vocab
    ours = tok.encode(mixed_text, add_special=True)
    assert ours.tolist() == llm.tokenize(mixed_text.encode(), add_bos=True, special=False)
    assert tok.decode(ours) == detokenize(llm, ours)


@pytest.mark.parametrize("pre, vocab_name", [("smollm", "gpt-2"), ("gpt-4o", "llama-bpe"), ("tekken", "llama-bpe"),
                                             ("default", "gpt-neox"), ("olmo", "gpt-2"), ("llama4", "qwen2")])
def test_pre_tokenizers_without_a_vocabulary_of_their_own(pre, vocab_name, mixed_text, tmp_path):
    """smollm, gpt-4o and tekken on a real BPE vocabulary whose tokenizer.ggml.pre is set to them (the
    sdist has no vocabulary of theirs); gpt-neox's file has no pre key (llama.cpp's "default")."""
    keys = vocab_keys(vocab_name)
    if pre != "default":
        keys["tokenizer.ggml.pre"] = pre
    path = tmp_path / f"{pre}.gguf"
    with pgo.core.GGUFFile() as f:
        f.set("general.architecture", "llama")
        for k, v in keys.items():
            f.set(k, v)
        f.write(path)
    tok = pgo.text.GGUFTokenizer.from_file(path)
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    try:
        ids = tok.encode(mixed_text)
        assert ids.tolist() == llm.tokenize(mixed_text.encode(), add_bos=True, special=False)
        assert tok.decode(ids) == detokenize(llm, ids)
    finally:
        llm.close()


def vocab_keys(name: str) -> dict:
    with pgo.core.GGUFFile.read(llama_cpp_source() / "models" / f"ggml-vocab-{name}.gguf") as f:
        return {k: f.get_typed(k) for k in f.keys() if k.startswith("tokenizer.") or k == "general.name"}


def test_unsupported_tokenizers_and_bad_keys_are_refused():
    keys = vocab_keys("qwen2")
    with pytest.raises(ValueError, match=r"tokenizer.ggml.pre is 'no-such-pre'; GGUFTokenizer reads \[.*'qwen2'"):
        pgo.text.GGUFTokenizer({**keys, "tokenizer.ggml.pre": "no-such-pre"})
    with pytest.raises(ValueError, match=r"tokenizer.ggml.model is 'rwkv'; GGUFTokenizer reads \['gpt2', 'llama', 'gemma4'\]"):
        pgo.text.GGUFTokenizer({**keys, "tokenizer.ggml.model": "rwkv"})
    with pytest.raises(ValueError, match="merges names tokens the vocabulary lacks"):
        pgo.text.GGUFTokenizer({**keys, "tokenizer.ggml.merges": [*keys["tokenizer.ggml.merges"][:5], "nope zilch"]})
    with pytest.raises(ValueError, match="tokenizer.ggml.model is 'bert'"):
        pgo.text.GGUFTokenizer.from_file(llama_cpp_source() / "models" / "ggml-vocab-bert-bge.gguf")
    spm = vocab_keys("llama-spm")
    with pytest.raises(ValueError, match=r"tokenizer.ggml.scores has 5 entries for 32000 tokens"):
        pgo.text.GGUFTokenizer({**spm, "tokenizer.ggml.scores": spm["tokenizer.ggml.scores"][:5]})
    with pytest.raises(ValueError, match=r"tokenizer.ggml.bos_token_id is 32000, not a token id of the 32000"):
        pgo.text.GGUFTokenizer({**spm, "tokenizer.ggml.bos_token_id": 32000})


def test_bad_ids_and_texts_are_refused(vocab):
    name, tok, _ = vocab
    with pytest.raises(ValueError, match=r"ids must be in \[0, "):
        tok.decode(np.array([0, tok.vocab_size]))
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match="text is not valid Unicode"):
        tok.encode("a lone surrogate \udc80")


def test_nul_and_control_characters_as_llama_cpp(vocab):
    name, tok, llm = vocab
    text = "nul\x00inside\x01\x7f and \t tabs\r\n"
    assert tok.encode(text, add_special=True).tolist() == llm.tokenize(text.encode(), add_bos=True, special=False)
