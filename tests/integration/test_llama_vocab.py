"""Tokenizers under llama.cpp's keys (pyggml_opt.text.llama_vocab), judged by llama.cpp itself.

- pyggml_opt reads llama.cpp's golden GPT-2 vocabulary (tests/integration/llama_vocab/) into a BPETokenizer whose
  ids are the golden ones, and llama.cpp gives the same ids from the file pyggml_opt writes anew;
- a BPETokenizer and a CharTokenizer trained on Debian's fortunes, written by pyggml_opt and loaded by
  llama.cpp (llama-cpp-python, built from source by the test extra, through its low-level API with
  vocab_only): llama.cpp's ids of 1 MB of held-out fortunes equal pyggml_opt's, id for id, and
  llama.cpp's detokenizer gives the text back;
- gguf-py's GGUFReader reads the files; tokenizers llama.cpp cannot represent are refused at save.

llama-cpp-python, gguf and tokenizers come with the test extra; without them these tests skip, unless
PYGGML_OPT_REQUIRE_C_TESTS=1 (CI), where they fail.
"""
from __future__ import annotations

import ctypes
import gzip
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import GGUFFile
from pyggml_opt.data import BPETokenizer, CharTokenizer
from pyggml_opt.saving import load_vocab, read_vocab, save_vocab, vocab_metadata
from support import fortunes_or_skip, import_or_skip

import_or_skip("tokenizers", "BPETokenizer trains with it")
GOLDEN = Path(__file__).resolve().parent / "llama_vocab" / "ggml-vocab-gpt-2.gguf"
HELD_OUT_BYTES = 1_000_000


# ---- llama.cpp through llama-cpp-python's low-level API ---------------------------------------------------
class LlamaVocab:
    """A GGUF's vocabulary loaded by llama.cpp (vocab_only: no hyperparameter, no tensor is read)."""

    def __init__(self, path: Path) -> None:
        self.llama = import_or_skip("llama_cpp", "llama.cpp judges the tokenizers")
        params = self.llama.llama_model_default_params()
        params.vocab_only = True
        self.model = self.llama.llama_model_load_from_file(str(path).encode(), params)
        assert self.model, f"llama.cpp could not load {path}"
        self.vocab = self.llama.llama_model_get_vocab(self.model)

    def close(self) -> None:
        self.llama.llama_model_free(self.model)

    def tokenize(self, text: str) -> list[int]:
        """llama_tokenize without BOS / EOS and without parsing special tokens in the text."""
        data = text.encode("utf-8")
        n_max = len(data) + 16
        out = (self.llama.llama_token * n_max)()
        n = self.llama.llama_tokenize(self.vocab, data, len(data), out, n_max, False, False)
        assert n >= 0, f"llama_tokenize needs {-n} tokens"
        return list(out[:n])

    def detokenize(self, ids: list[int]) -> bytes:
        """llama_detokenize, special tokens left out (as ``decode`` does)."""
        arr = (self.llama.llama_token * len(ids))(*ids)
        size = 8 * len(ids) + 64
        buf = ctypes.create_string_buffer(size)
        n = self.llama.llama_detokenize(self.vocab, arr, len(ids), buf, size, False, False)
        assert 0 <= n <= size
        return buf.raw[:n]


@pytest.fixture(scope="module")
def golden_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("golden") / GOLDEN.name
    with gzip.open(GOLDEN.with_name(GOLDEN.name + ".gz"), "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def golden_cases() -> list[tuple[str, list[int]]]:
    """llama.cpp's tests/test-tokenizer-0 cases: texts separated by "\\n__ggml_vocab_test__\\n", and one
    line of ids per text."""
    sep = "\n__ggml_vocab_test__\n"
    raw = GOLDEN.with_name(GOLDEN.name + ".inp").read_bytes().decode("utf-8")
    texts = raw.split(sep)[:-1] if raw.endswith(sep) else raw.split(sep)  # as test-tokenizer-0.cpp splits
    lines = GOLDEN.with_name(GOLDEN.name + ".out").read_text(encoding="utf-8").splitlines()
    assert len(texts) == len(lines) == 46
    return [(t, [int(i) for i in line.split()]) for t, line in zip(texts, lines)]


@pytest.fixture(scope="module")
def fortunes():
    """(training texts, 1 MB of held-out text): a seeded split of every fortune."""
    texts = fortunes_or_skip()
    order = np.random.default_rng(0).permutation(len(texts))
    held, size = [], 0
    for i in order:
        if size >= HELD_OUT_BYTES:
            break
        held.append(texts[i])
        size += len(texts[i].encode()) + 2
    train = [texts[i] for i in order[len(held):]]
    return train, "\n\n".join(held)


# ---- golden: GPT-2 -------------------------------------------------------------------------------------
def test_gpt2_golden_ids_from_pyggml_opt_reading_llama_cpp_keys(golden_file):
    tok = load_vocab(golden_file)
    assert isinstance(tok, BPETokenizer)
    assert tok.vocab_size == 50257 and len(tok.merges) == 50000 and tok.special_tokens == ["<|endoftext|>"]
    for text, ids in golden_cases():
        assert tok.encode(text).tolist() == ids, text


def test_gpt2_golden_ids_from_llama_cpp_reading_pyggml_opt_keys(golden_file, tmp_path):
    """The vocabulary pyggml_opt read, written by pyggml_opt (pre-tokenizer "trillion"), tokenized by
    llama.cpp: the golden ids."""
    save_vocab(tmp_path / "gpt2.gguf", load_vocab(golden_file), architecture="gpt2")
    llama = LlamaVocab(tmp_path / "gpt2.gguf")
    try:
        for text, ids in golden_cases():
            assert llama.tokenize(text) == ids, text
            assert llama.detokenize(ids) == text.encode(), text
    finally:
        llama.close()


# ---- the judge: tokenizers trained on the fortunes -------------------------------------------------------
def judge(tok, path: Path, text: str) -> list[int]:
    """pyggml_opt's ids of ``text`` after asserting that llama.cpp's, from ``path``, are the same."""
    ours = tok.encode(text).tolist()
    llama = LlamaVocab(path)
    try:
        theirs = llama.tokenize(text)
        assert len(theirs) == len(ours)
        diff = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        assert diff is None, f"first difference at id {diff}: pyggml_opt {ours[diff:diff + 5]}, llama.cpp {theirs[diff:diff + 5]}"
        assert llama.detokenize(theirs).decode("utf-8") == tok.decode(ours)
    finally:
        llama.close()
    return ours


def test_bpe_trained_on_fortunes_llama_cpp_tokenizes_held_out_text_identically(fortunes, tmp_path):
    train, held_out = fortunes
    tok = BPETokenizer.fit(train, 4096)
    assert tok.vocab_size == 4096
    save_vocab(tmp_path / "bpe.gguf", tok)
    ids = judge(tok, tmp_path / "bpe.gguf", held_out)
    assert tok.decode(ids) == held_out
    # merges compress: 1,000,296 bytes of held-out fortunes are 337,345 ids (2.97 bytes per id)
    assert 2.5 < len(held_out.encode()) / len(ids) < 3.5
    assert load_vocab(tmp_path / "bpe.gguf") == tok


def test_char_tokenizer_trained_on_fortunes_llama_cpp_tokenizes_held_out_text_identically(fortunes, tmp_path):
    train, held_out = fortunes
    tok = CharTokenizer.fit(train)
    save_vocab(tmp_path / "char.gguf", tok)
    ids = judge(tok, tmp_path / "char.gguf", held_out)
    # the held-out fortunes have two characters the training ones lack ('ü', '£'), each the unknown id
    unknown = [c for c in held_out if c not in tok.chars]
    assert sorted(unknown) == ["£", "ü"] and ids.count(1) == 2
    assert tok.decode(ids) == "".join("\ufffd" if c in unknown else c for c in held_out)
    assert load_vocab(tmp_path / "char.gguf").chars == tok.chars


def test_char_tokenizer_unknown_characters_in_llama_cpp(tmp_path):
    """Each unknown character is id 1 in both; a run of unknown characters is one id in llama.cpp
    (unigram's convention), one per character in pyggml_opt: the documented difference."""
    tok = CharTokenizer("ab c\n<>pd")
    save_vocab(tmp_path / "char.gguf", tok)
    llama = LlamaVocab(tmp_path / "char.gguf")
    try:
        assert llama.tokenize("a b\u00e9c") == tok.encode("a b\u00e9c").tolist() == [2, 4, 3, 1, 5]
        assert llama.tokenize("a\u00e9\u00fcb") == [2, 1, 3] and tok.encode("a\u00e9\u00fcb").tolist() == [2, 1, 1, 3]
        # U+FFFD (how both decode the unknown id) and the token texts of padding are text
        assert llama.tokenize("<pad>\ufffd") == tok.encode("<pad>\ufffd").tolist() == [7, 9, 2, 10, 8, 1]
        assert llama.detokenize([0, 2, 1, 3, 0]) == tok.decode([0, 2, 1, 3, 0]).encode() == "a\ufffdb".encode()
    finally:
        llama.close()


def test_characters_llama_cpp_reads_as_unknown_are_refused(tmp_path):
    """llama.cpp 0.3.36 tokenizes every character of U+F000-U+FFFF (UTF-8 starting with 0xEF, as the
    unknown id's U+FFFD) as the unknown id (measured over every character up to U+2FFFF: those 4,095
    differ, no other): such a tokenizer is refused at save; the characters just below stay tokens."""
    for c in ("\uf000", "\ufeff", "\uff21", "\uffff"):  # the first, the BOM, a fullwidth 'A', the last
        with pytest.raises(ValueError, match=re.escape(f"character {c!r} (id 4)") + ".*as the unknown id"):
            save_vocab(tmp_path / "x.gguf", CharTokenizer("ab" + c))
    neighbours = "".join(map(chr, range(0xE000, 0xF000)))  # UTF-8 starting with 0xEE
    tok = CharTokenizer("ab " + neighbours)
    save_vocab(tmp_path / "char.gguf", tok)
    assert judge(tok, tmp_path / "char.gguf", "a".join(neighbours)) == tok.encode("a".join(neighbours)).tolist()


# ---- the files: keys, readers, models carrying a tokenizer ---------------------------------------------
def test_gguf_py_reads_the_keys_with_llama_cpp_types(tmp_path):
    gguf = import_or_skip("gguf", "gguf-py's GGUFReader checks the files")
    save_vocab(tmp_path / "char.gguf", CharTokenizer("ab "))
    reader = gguf.GGUFReader(tmp_path / "char.gguf")
    f = reader.fields
    assert f["general.architecture"].contents() == "llama" and f["tokenizer.ggml.model"].contents() == "t5"
    assert f["tokenizer.ggml.tokens"].contents() == ["<pad>", "\ufffd", "a", "b", "\u2581"]
    assert f["tokenizer.ggml.token_type"].contents() == [3, 4, 1, 1, 1]
    assert f["tokenizer.ggml.unknown_token_id"].types == [gguf.GGUFValueType.UINT32]
    assert f["tokenizer.ggml.add_space_prefix"].contents() is False
    tok = BPETokenizer.fit(["aaaa"] * 10, 259)
    save_vocab(tmp_path / "bpe.gguf", tok, architecture="gpt2")
    f = gguf.GGUFReader(tmp_path / "bpe.gguf").fields
    assert f["tokenizer.ggml.model"].contents() == "gpt2" and f["tokenizer.ggml.pre"].contents() == "trillion"
    assert f["tokenizer.ggml.merges"].contents() == ["a a", "aa aa"]
    assert f["tokenizer.ggml.eos_token_id"].contents() == 0 and len(f["tokenizer.ggml.tokens"].contents()) == 259


def test_a_model_file_carries_the_tokenizer(tmp_path):
    tok = CharTokenizer("abc ")
    model = pgo.models.gpt(tok.vocab_size, context=8, dim=8, n_layers=1, n_heads=2)
    model.save(tmp_path / "gpt.gguf", extra=vocab_metadata(tok))
    assert load_vocab(tmp_path / "gpt.gguf").chars == tok.chars
    back = pgo.load(tmp_path / "gpt.gguf")
    assert back.get_config() == model.get_config()


def test_tokens_llama_cpp_cannot_represent_are_refused_at_save(tmp_path):
    for chars, match in (("a\u2581", "'\u2581'"), ("a\ufffd", "'\ufffd'"), ("a\x00", r"token 3 \('\\x00'\).*NUL"),
                         ("a\udc80", r"'\\udc80'.*UTF-8")):
        with pytest.raises(ValueError, match=match):
            save_vocab(tmp_path / "x.gguf", CharTokenizer(chars))
        with pytest.raises(ValueError, match=match):
            vocab_metadata(CharTokenizer(chars))
    tok = BPETokenizer.fit(["aaaa"] * 10, 259)
    bad = BPETokenizer(tok.tokens + ["<a\x00b>"], tok.merges, ["<|endoftext|>", "<a\x00b>"])
    with pytest.raises(ValueError, match=r"token 259 \('<a\\x00b>'\).*NUL"):
        save_vocab(tmp_path / "x.gguf", bad)
    assert not (tmp_path / "x.gguf").exists()
    with pytest.raises(TypeError, match="BPETokenizer or a CharTokenizer"):
        vocab_metadata("abc")
    with pytest.raises(ValueError, match="architecture"):
        save_vocab(tmp_path / "x.gguf", tok, architecture="mamba")


def test_files_without_a_vocabulary_pyggml_opt_reads_are_refused(tmp_path, golden_file):
    model = pgo.models.gpt(5, context=4, dim=8, n_layers=1, n_heads=2)
    model.save(tmp_path / "plain.gguf")
    with pytest.raises(ValueError, match="no string array tokenizer.ggml.tokens"):
        load_vocab(tmp_path / "plain.gguf")

    def rewrite(path, **changes):
        with GGUFFile.read(golden_file) as src, GGUFFile() as dst:
            for key in src.keys():
                value = src.get_array(key) if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                                                      "tokenizer.ggml.token_type") else src.get(key)
                dst.set(key, changes.get(key, value))
            dst.write(path)
        with GGUFFile.read(path) as f:
            return read_vocab(f)

    with pytest.raises(ValueError, match="'llama3'"):
        rewrite(tmp_path / "a.gguf", **{"tokenizer.ggml.pre": "llama3"})
    with pytest.raises(ValueError, match="'bert'"):
        rewrite(tmp_path / "b.gguf", **{"tokenizer.ggml.model": "bert"})
    types = np.ones(50257, np.int32)
    types[5] = 6
    with pytest.raises(ValueError, match="token 5 .* token type 6"):
        rewrite(tmp_path / "c.gguf", **{"tokenizer.ggml.token_type": types})
    save_vocab(tmp_path / "t5.gguf", CharTokenizer("ab"))
    with GGUFFile.read(tmp_path / "t5.gguf") as src, GGUFFile() as dst:
        for key in src.keys():
            value = src.get_array(key) if key.startswith("tokenizer.ggml.") and key.endswith(("tokens", "type", "scores")) else src.get(key)
            dst.set(key, ["<pad>", "\ufffd", "ab", "c"] if key == "tokenizer.ggml.tokens" else value)
        dst.write(tmp_path / "t5x.gguf")
    with pytest.raises(ValueError, match="'ab' is not one normal character"):
        load_vocab(tmp_path / "t5x.gguf")


def test_what_a_user_calls_llama_cpp_python_llama_with_vocab_only(tmp_path):
    """llama_cpp.Llama(path, vocab_only=True): tokenize and detokenize as pyggml_opt encodes and decodes;
    the same file without vocab_only is a ValueError (a vocabulary file has no weights), not a crash."""
    llama_cpp = import_or_skip("llama_cpp", "llama.cpp judges the tokenizers")
    text = "The cat sat on the mat.\n\tThe end, said Zoë."
    for tok in (BPETokenizer.fit([text] * 5, 300), CharTokenizer.fit([text])):
        save_vocab(tmp_path / "v.gguf", tok)
        llm = llama_cpp.Llama(str(tmp_path / "v.gguf"), vocab_only=True, verbose=False)
        ids = llm.tokenize(text.encode(), add_bos=False, special=False)
        assert ids == tok.encode(text).tolist()
        assert llm.detokenize(ids).decode() == text == tok.decode(ids)
        llm.close()
        with pytest.raises(ValueError, match="Failed to load model"):
            llama_cpp.Llama(str(tmp_path / "v.gguf"), verbose=False)
