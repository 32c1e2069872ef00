"""BPETokenizer: byte-level BPE trained on the user's texts (Hugging Face tokenizers does the training),
with CharTokenizer's API: encode one text or a batch, decode one sequence or a batch, pickling, files.
Its agreement with llama.cpp is tests/integration/test_llama_vocab.py's."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from pyggml_opt.data import BPETokenizer
from support import import_or_skip

import_or_skip("tokenizers", "BPETokenizer trains with it")

CORPUS = ["The cat sat on the mat.", "The dog sat on the log!", "Cats and dogs, mats and logs.",
          "Zwölf Äpfel für 3,50 €\n\tthe end"]


@pytest.fixture(scope="module")
def tok():
    return BPETokenizer.fit(CORPUS * 20, 300)


def test_a_corpus_of_one_letter_merges_as_bpe_does():
    # 'aaaa' x 10: the first merge is (a, a), the second (aa, aa); vocabulary: the special token, the
    # 256 byte symbols, 'aa', 'aaaa'
    tok = BPETokenizer.fit(["aaaa"] * 10, 259)
    assert tok.vocab_size == 259 and tok.merges == [("a", "a"), ("aa", "aa")]
    assert tok.tokens[0] == "<|endoftext|>" and tok.tokens[257:] == ["aa", "aaaa"]
    assert tok.encode("aaaaa").tolist() == [258, tok.tokens.index("a")]
    assert tok.decode([258, 258, 257]) == "aaaaaaaaaa"


def test_vocabulary_and_round_trip(tok):
    assert tok.vocab_size == 300 and tok.eos_id == 0 and len(tok.merges) == 300 - 257
    for text in CORPUS + ["unseen wörds, 🦙 and \x00 bytes", ""]:
        ids = tok.encode(text)
        assert ids.dtype == np.int32 and ids.ndim == 1
        assert tok.decode(ids) == text
    # merges compress the training text: fewer ids than UTF-8 bytes
    assert tok.encode(CORPUS[0]).size < len(CORPUS[0].encode()) / 2


def test_special_tokens_never_come_from_text_and_decode_drops_them(tok):
    ids = tok.encode("a<|endoftext|>b")
    assert tok.eos_id not in ids.tolist() and tok.decode(ids) == "a<|endoftext|>b"
    assert tok.decode([tok.eos_id, *tok.encode("ab").tolist(), tok.eos_id]) == "ab"


def test_encode_batches_and_lengths(tok):
    one = tok.encode("The cat sat on the mat.")
    assert tok.encode("The cat sat on the mat.", 3).tolist() == one[:3].tolist()
    padded = tok.encode("The cat", 10)
    n = tok.encode("The cat").size
    assert padded.shape == (10,) and (padded[n:] == tok.eos_id).all()
    batch = tok.encode(["The cat", "sat on the mat."], 6)
    assert batch.shape == (2, 6) and batch.dtype == np.int32
    assert tok.decode(batch) == ["The cat", tok.decode(tok.encode("sat on the mat.")[:6])]
    assert tok.encode([], 4).shape == (0, 4)


def test_copies_pickles_and_files(tok, tmp_path):
    text = CORPUS[3]
    for other in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok), BPETokenizer.from_config(tok.get_config())):
        assert other == tok and other.encode(text).tolist() == tok.encode(text).tolist()
    tok.save(tmp_path / "tokenizer.json")
    back = BPETokenizer.load(tmp_path / "tokenizer.json")
    assert back == tok and back.encode(text).tolist() == tok.encode(text).tolist()
    # the file is Hugging Face's tokenizer.json: tokenizers reads it as the same tokenizer
    tokenizers = import_or_skip("tokenizers", "")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert hf.encode(text).ids == tok.encode(text).tolist()


def test_bad_input():
    with pytest.raises(ValueError, match="empty corpus"):
        BPETokenizer.fit([], 300)
    with pytest.raises(ValueError, match="empty corpus"):
        BPETokenizer.fit(["", ""], 300)
    with pytest.raises(ValueError, match="at least 257"):
        BPETokenizer.fit(CORPUS, 256)
    with pytest.raises(TypeError, match="bytes"):
        BPETokenizer.fit([b"raw bytes"], 300)
    with pytest.raises(TypeError, match="one str"):
        BPETokenizer.fit("one text", 300)
    with pytest.raises(TypeError, match="int at index 1"):
        BPETokenizer.fit(["a", 1], 300)
    with pytest.raises((TypeError, ValueError), match="vocab_size"):
        BPETokenizer.fit(CORPUS, "300")


def test_bad_input_to_encode_decode(tok):
    with pytest.raises(TypeError, match="needs the length"):
        tok.encode(["a", "b"])
    with pytest.raises(TypeError, match="bytes"):
        tok.encode([b"a"], 3)
    with pytest.raises(ValueError, match="length must be an int >= 1"):
        tok.encode("a", 0)
    with pytest.raises(ValueError, match="outside"):
        tok.decode([0, 300])
    with pytest.raises(ValueError, match="outside"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="integers"):
        tok.decode([0.5])
    with pytest.raises(ValueError, match="1-D.*2-D"):
        tok.decode(np.zeros((1, 1, 1), np.int32))


def test_bad_vocabularies(tok):
    tokens, merges = list(tok.tokens), list(tok.merges)
    with pytest.raises(ValueError, match="appears twice"):
        BPETokenizer(tokens + ["Ġthe" if "Ġthe" in tokens else tokens[-1]], merges)
    with pytest.raises(ValueError, match="byte symbol 'a' is not a token"):
        BPETokenizer([t if t != "a" else "<x>" for t in tokens], merges, ["<|endoftext|>", "<x>"])
    with pytest.raises(ValueError, match="merge"):
        BPETokenizer(tokens, merges + [("Z", "Q")])
    with pytest.raises(ValueError, match="not a byte-level token"):
        BPETokenizer(tokens + ["two words"], merges)
    with pytest.raises(ValueError, match="at least one"):
        BPETokenizer(tokens, merges, [])
    with pytest.raises(ValueError, match="not among the tokens"):
        BPETokenizer(tokens, merges, ["<none>"])


def test_hostile_sizes_lists_and_files(tok, tmp_path):
    # 10**9 aborted the process (a Rust panic in tokenizers' trainer), 2**64 was an OverflowError
    for size in (2**24 + 1, 10**9, 2**64):
        with pytest.raises(ValueError, match=r"vocab_size must be an int in \[1, 16777216\]"):
            BPETokenizer.fit(CORPUS, size)
    # one str was split into special tokens of one character each
    with pytest.raises(TypeError, match="special_tokens must be a list of str, got '<eos>'"):
        BPETokenizer.fit(CORPUS, 300, special_tokens="<eos>")
    with pytest.raises(TypeError, match="special_tokens must be a list of str"):
        BPETokenizer(tok.tokens, tok.merges, "<|endoftext|>")
    # 'a' as a special token: encode("a cat") decoded as " ct"
    with pytest.raises(ValueError, match="special token 'a' is also a token of text .* decode would drop"):
        BPETokenizer.fit(CORPUS, 300, special_tokens=["<|endoftext|>", "a"])
    with pytest.raises(ValueError, match="special token 'at' is also a token of text"):
        BPETokenizer.fit(CORPUS * 20, 300, special_tokens=["<|endoftext|>", "at"])  # a merge of 'a', 't'
    with pytest.raises(ValueError, match="special token must not be empty"):
        BPETokenizer.fit(CORPUS, 300, special_tokens=["<|endoftext|>", ""])
    for merges in ([("a",)], ["a b"], None):  # was numpy's unpacking errors, or 'NoneType' is not iterable
        with pytest.raises(TypeError, match="merges must be a list of pairs"):
            BPETokenizer(tok.tokens, merges)
    with pytest.raises(ValueError, match="text 0 is not valid UTF-8 text .*surrogate"):
        tok.encode("a\ud800b")  # was TypeError: TextInputSequence must be str
    with pytest.raises(ValueError, match="text 1 is not valid UTF-8"):
        tok.encode(["ok", "\udfff"], 4)
    path = tmp_path / "tokenizer.json"
    for text in ('{"model": {"type": "BPE"}}', '{"model": {"type": "BPE", "vocab": [1], "merges": []}}'):
        path.write_text(text)  # were KeyError and IndexError
        with pytest.raises(ValueError, match="is not a BPE tokenizer.json BPETokenizer reads"):
            BPETokenizer.load(path)
