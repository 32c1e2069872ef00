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

import numpy as np
import pytest

import pyggml_opt as pgo
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
