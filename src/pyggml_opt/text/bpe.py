"""A byte-level BPE tokenizer (GPT-2's scheme) that a user trains on their own texts.

Hugging Face's ``tokenizers`` (``pip install "pyggml_opt[text]"``) trains it and encodes with it;
this class fixes the scheme llama.cpp reproduces (``text.llama_vocab`` writes it into a GGUF as
llama.cpp's ``gpt2`` tokenizer): GPT-2's pre-tokenizing regular expression, every byte of the
UTF-8 text one of 256 base symbols, merges applied by rank, no normalisation, no prefix space.
Special tokens (``<|endoftext|>`` by default) are control tokens: ``encode`` never produces them
from text (a text that contains "<|endoftext|>" is tokenized as those characters), ``decode`` drops
them, and the first one pads batches and ends texts in a model file.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..atomic import atomic_file
from ..checks import check_int
from .char import iter_texts
from .extra import text_extra

END_OF_TEXT = "<|endoftext|>"
N_BYTES = 256  # the base symbols: one per byte value
# a larger vocabulary is no tokenizer anyone trains; tokenizers' trainer reserves memory for the size
# asked up front and aborts the process (a Rust panic) when that fails (10**9 on a 23 GB machine)
MAX_VOCAB = 1 << 24


def _tokenizers() -> Any:
    return text_extra("tokenizers", "BPETokenizer")


def _strings(name: str, values: object) -> list[str]:
    """``values`` as a list of str: TypeError for one str (a list of its characters is never meant) or
    anything but a sequence of str."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)) or \
            not all(isinstance(v, str) for v in values):
        raise TypeError(f"{name} must be a list of str, got {values!r:.80}")
    return list(values)


def _pairs(merges: list) -> list[tuple[str, str]]:
    """A tokenizer.json's merges as pairs: "left right" strings (tokenizers < 0.20) or [left, right]."""
    pairs = [m.split(" ", 1) if isinstance(m, str) else m for m in merges]
    return [(str(a), str(b)) for a, b in pairs]


class BPETokenizer:
    """Texts <-> int ids by byte-level BPE. ``BPETokenizer.fit(texts, vocab_size)`` learns the merges
    from ``texts``; ``BPETokenizer(tokens, merges, special_tokens)`` rebuilds one (from a file).

    ``tokens`` are the token texts by id, written as GPT-2 writes bytes (each byte one character,
    the space "Ġ"); ``merges`` the learnt pairs (left, right) in the order they apply;
    ``special_tokens`` the tokens among ``tokens`` that stand for no text, the first of them the
    end-of-text id (``eos_id``). All 256 byte symbols must be tokens, so that every text encodes.
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[tuple[str, str]],
                 special_tokens: Sequence[str] = (END_OF_TEXT,)) -> None:
        tk = _tokenizers()
        self.tokens = _strings("tokens", tokens)
        if not isinstance(merges, (list, tuple)) or not all(isinstance(m, (list, tuple)) and len(m) == 2 for m in merges):
            raise TypeError(f"merges must be a list of pairs (left, right), got {merges!r:.80}")
        self.merges = [(a, b) for a, b in (_strings("a merge", list(m)) for m in merges)]
        self.special_tokens = _strings("special_tokens", special_tokens)
        if "" in self.special_tokens:
            raise ValueError("a special token must not be empty")
        ids = {t: i for i, t in enumerate(self.tokens)}
        if len(ids) != len(self.tokens):
            dup = next(t for i, t in enumerate(self.tokens) if ids[t] != i)
            raise ValueError(f"token {dup!r} appears twice in tokens")
        if not self.special_tokens:
            raise ValueError("special_tokens needs at least one token: the end-of-text id")
        missing = [t for t in self.special_tokens if t not in ids]
        if missing:
            raise ValueError(f"special token {missing[0]!r} is not among the tokens")
        alphabet = set(tk.pre_tokenizers.ByteLevel.alphabet())
        special = set(self.special_tokens)
        for t in self.tokens:
            if t not in special and (not t or not set(t) <= alphabet):
                raise ValueError(f"token {t!r} is not a byte-level token (each character one of the 256 byte "
                                 "symbols) nor a special token")
        absent = sorted(alphabet - ids.keys())
        if absent:
            raise ValueError(f"the byte symbol {absent[0]!r} is not a token: some texts would not encode")
        for a, b in self.merges:
            if a not in ids or b not in ids or a + b not in ids:
                raise ValueError(f"merge ({a!r}, {b!r}) needs {a!r}, {b!r} and {a + b!r} among the tokens")
        made = alphabet | {a + b for a, b in self.merges}
        clash = next((t for t in self.special_tokens if t in made), None)
        if clash is not None:  # encode would give its id for that text, and decode drop it
            raise ValueError(f"special token {clash!r} is also a token of text (a byte symbol or a merge's result): "
                             "decode would drop that text")
        model = tk.models.BPE(vocab=ids, merges=self.merges)
        tok = tk.Tokenizer(model)
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = tk.decoders.ByteLevel()
        tok.add_special_tokens([tk.AddedToken(t, special=True, normalized=False) for t in self.special_tokens])
        tok.encode_special_tokens = True  # "<|endoftext|>" in a text is text, as in llama.cpp with special=False
        self._tok = tok
        self._special_ids = np.array(sorted(ids[t] for t in special), np.int64)

    @classmethod
    def fit(cls, texts: Iterable[str], vocab_size: int,
            special_tokens: Sequence[str] = (END_OF_TEXT,)) -> "BPETokenizer":
        """Learn a vocabulary of at most ``vocab_size`` tokens from ``texts``: the special tokens, the
        256 byte symbols, then merges of the most frequent pairs until the size is reached (fewer on
        a corpus too small to fill it)."""
        tk = _tokenizers()
        vocab_size = check_int("vocab_size", vocab_size, 1, MAX_VOCAB)
        special_tokens = _strings("special_tokens", special_tokens)
        smallest = N_BYTES + len(special_tokens)
        if vocab_size < smallest:
            raise ValueError(f"vocab_size must be at least {smallest} (the {N_BYTES} byte symbols and "
                             f"{len(special_tokens)} special tokens), got {vocab_size}")
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of texts, got one str: pass [text]")
        corpus = list(iter_texts(texts))
        if not any(corpus):
            raise ValueError("cannot fit a tokenizer on an empty corpus (no text, or only empty texts)")
        tok = tk.Tokenizer(tk.models.BPE())
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                                         initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
                                         show_progress=False)
        tok.train_from_iterator(corpus, trainer)
        model = json.loads(tok.to_str())["model"]
        tokens = sorted(model["vocab"], key=model["vocab"].__getitem__)
        return cls(tokens, _pairs(model["merges"]), special_tokens)

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included: an Embedding's ``num_embeddings``."""
        return len(self.tokens)

    @property
    def eos_id(self) -> int:
        """The end-of-text id (the first special token): pads batches, ends generated texts."""
        return self.tokens.index(self.special_tokens[0])

    def encode(self, texts: str | Sequence[str], length: int | None = None) -> np.ndarray:
        """Ids of a text or of a batch of texts, int32.

        ``encode("The cat")`` gives the text's ids (1-D); ``encode(texts, length)`` gives
        ``(len(texts), length)``: each text's first ``length`` ids, padded with ``eos_id`` (a single
        text with ``length`` is cut or padded the same way). Special tokens never come from text.
        """
        if length is not None:
            length = check_int("length", length)
        if isinstance(texts, str):
            ids = np.asarray(self._encode([texts])[0].ids, np.int32)
            return ids if length is None else self._fit_length(ids, int(length))
        if length is None:
            raise TypeError("encode(texts, length): a batch of texts needs the length of its rows")
        batch = list(iter_texts(texts))
        rows = self._encode(batch) if batch else []
        out = np.full((len(batch), int(length)), self.eos_id, np.int32)
        for row, enc in enumerate(rows):
            out[row] = self._fit_length(np.asarray(enc.ids, np.int32), int(length))
        return out

    def _encode(self, batch: list[str]) -> list:
        try:
            return self._tok.encode_batch(batch, add_special_tokens=False)
        except TypeError:  # tokenizers' words for a str it cannot take: one that is not UTF-8
            for i, text in enumerate(batch):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise ValueError(f"text {i} is not valid UTF-8 text ({exc.reason} at {exc.start}: a lone "
                                     "surrogate)") from None
            raise

    def _fit_length(self, ids: np.ndarray, length: int) -> np.ndarray:
        out = np.full(length, self.eos_id, np.int32)
        out[:min(length, ids.size)] = ids[:length]
        return out

    def decode(self, ids: ArrayLike) -> str | list[str]:
        """The text of a sequence of ids, or a list of texts for a batch (2-D ids); special tokens are
        dropped, bytes that do not form UTF-8 read as U+FFFD."""
        arr = np.asarray(ids)
        if arr.dtype.kind not in "iub" and arr.size:
            raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
        if arr.ndim > 2:
            raise ValueError(f"ids must be one sequence (1-D) or a batch (2-D), got shape {arr.shape}")
        bad = arr[(arr < 0) | (arr >= self.vocab_size)]
        if bad.size:
            raise ValueError(f"id {int(bad.flat[0])} is outside this tokenizer's [0, {self.vocab_size})")
        if arr.ndim == 2:
            return [self._text_of(row) for row in arr]
        return self._text_of(arr.reshape(-1))

    def _text_of(self, ids: np.ndarray) -> str:
        return str(self._tok.decode(ids.astype(np.int64).tolist(), skip_special_tokens=True))

    # ---- configuration, pickling, files ------------------------------------------------------------------
    def get_config(self) -> dict:
        """JSON-ready: what ``from_config`` needs."""
        return {"tokens": list(self.tokens), "merges": [list(m) for m in self.merges],
                "special_tokens": list(self.special_tokens)}

    @classmethod
    def from_config(cls, config: dict) -> "BPETokenizer":
        return cls(config["tokens"], [tuple(m) for m in config["merges"]], config["special_tokens"])

    def __getstate__(self) -> dict:
        return self.get_config()

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["tokens"], [tuple(m) for m in state["merges"]], state["special_tokens"])  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BPETokenizer) and self.get_config() == other.get_config()

    __hash__ = None  # type: ignore[assignment]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer as a Hugging Face ``tokenizer.json`` (``tokenizers.Tokenizer.from_file``
        reads it too); the file is replaced atomically."""
        with atomic_file(path) as out:
            out.write(self._tok.to_str(pretty=True).encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "BPETokenizer":
        """A tokenizer from a ``tokenizer.json`` holding a BPE model (``save``'s, or GPT-2's from Hugging
        Face); ValueError for another kind of model."""
        with open(path, encoding="utf-8") as f:
            try:
                spec = json.load(f)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{os.fspath(path)!r} is not a tokenizer.json ({exc})") from None
        model = spec.get("model") if isinstance(spec, dict) else None
        if not isinstance(model, dict) or model.get("type") != "BPE":
            raise ValueError(f"{os.fspath(path)!r} holds no BPE model (its model: "
                             f"{model.get('type') if isinstance(model, dict) else model!r})")
        try:
            vocab = model["vocab"]
            tokens = sorted(vocab, key=vocab.__getitem__)
            special = [t["content"] for t in sorted(spec.get("added_tokens") or [], key=lambda t: t["id"])
                       if t.get("special")]
            return cls(tokens, _pairs(model["merges"]), special)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{os.fspath(path)!r} is not a BPE tokenizer.json BPETokenizer reads "
                             f"({type(exc).__name__}: {exc})") from None
