"""A character tokenizer: one id per character of the texts it was fitted on.

``CharTokenizer`` maps each character of a training text to an id (0 is padding, 1 stands for a
character the tokenizer has not seen), so that a model starting with ``layers.Embedding`` can take
``encode(texts, length)``. ``iter_texts`` is the check of a batch of texts both tokenizers share.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int

PAD, UNKNOWN = 0, 1  # the ids every CharTokenizer reserves


class CharTokenizer:
    """Characters <-> int ids. ``CharTokenizer.fit(texts)`` takes every character of ``texts`` (sorted,
    so the same texts give the same ids); ids 0 and 1 are padding and unknown characters."""

    def __init__(self, chars: str) -> None:
        if not isinstance(chars, str):  # a list of longer strings would be tokens no text ever matches
            raise TypeError(f"chars must be a str (one token per character), got {type(chars).__name__}")
        if len(set(chars)) != len(chars):
            raise ValueError("chars must not repeat a character")
        self.chars = chars
        self._ids = {c: i + 2 for i, c in enumerate(chars)}

    @classmethod
    def fit(cls, texts: Iterable[str]) -> "CharTokenizer":
        """A tokenizer for every character that occurs in ``texts``."""
        seen: set[str] = set()
        for t in iter_texts(texts):
            seen.update(t)
        return cls("".join(sorted(seen)))

    @property
    def vocab_size(self) -> int:
        """Number of ids, padding and unknown included: an Embedding's ``num_embeddings``."""
        return len(self.chars) + 2

    def encode(self, texts: str | Sequence[str], length: int | None = None) -> np.ndarray:
        """Ids of a text or of a batch of texts, int32.

        ``encode("The ")`` gives the text's ids, one per character (shape ``(4,)``);
        ``encode(texts, length)`` gives ``(len(texts), length)``: each text's first ``length``
        characters, padded with 0 (a single text with ``length`` is cut or padded the same way).
        Characters the tokenizer has not seen get id 1.
        """
        if length is not None:
            length = check_int("length", length)
        if isinstance(texts, str):
            ids = self._ids_of(texts)
            if length is None:
                return ids
            out = np.zeros(int(length), np.int32)
            out[:min(length, ids.size)] = ids[:length]
            return out
        if length is None:
            raise TypeError("encode(texts, length): a batch of texts needs the length of its rows")
        out = np.zeros((len(texts), int(length)), np.int32)
        for row, t in enumerate(iter_texts(texts)):
            ids = self._ids_of(t[:length])
            out[row, :ids.size] = ids
        return out

    def _ids_of(self, text: str) -> np.ndarray:
        return np.fromiter((self._ids.get(c, UNKNOWN) for c in text), np.int32, len(text))

    def decode(self, ids: ArrayLike) -> str | list[str]:
        """The text of a sequence of ids, or a list of texts for a batch (2-D ids, as ``generate``
        returns for several prompts); padding is dropped, unknown characters read as U+FFFD."""
        arr = np.asarray(ids)
        if arr.dtype.kind not in "iub" and arr.size:
            raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
        if arr.ndim == 2:
            return [self._text_of(row) for row in arr]
        if arr.ndim > 2:
            raise ValueError(f"ids must be one sequence (1-D) or a batch (2-D), got shape {arr.shape}")
        return self._text_of(arr.reshape(-1))

    def _text_of(self, ids: np.ndarray) -> str:
        bad = ids[(ids < 0) | (ids >= self.vocab_size)]
        if bad.size:
            raise ValueError(f"id {int(bad[0])} is outside this tokenizer's [0, {self.vocab_size})")
        return "".join(self.chars[i - 2] if i >= 2 else "\ufffd" for i in ids.tolist() if i != PAD)

    def get_config(self) -> dict:
        """JSON-ready: what ``from_config`` needs."""
        return {"chars": self.chars}

    @classmethod
    def from_config(cls, config: dict) -> "CharTokenizer":
        return cls(config["chars"])

    METADATA_KEY = "tokenizer.pyggml_opt.chars"  # where a model file keeps the characters

    def to_metadata(self) -> dict[str, object]:
        """The tokenizer as GGUF keys, for ``model.save(path, extra=...)``."""
        return {self.METADATA_KEY: self.chars}

    @classmethod
    def from_metadata(cls, metadata: dict[str, object]) -> "CharTokenizer":
        """The tokenizer ``to_metadata`` stored, from a file's keys (``saving.load_metadata(path)``)."""
        if not isinstance(metadata, dict) or not isinstance(metadata.get(cls.METADATA_KEY), str):
            raise ValueError(f"no character tokenizer among the keys (no string {cls.METADATA_KEY!r})")
        return cls(str(metadata[cls.METADATA_KEY]))


def iter_texts(texts: Iterable[object]) -> Iterator[str]:
    """The items of ``texts``, each checked to be a str: bytes (a file read in "rb") would otherwise
    map every byte to the unknown id, silently."""
    hint = ": decode bytes first, e.g. data.decode('utf-8')"
    if isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Iterable):
        raise TypeError(f"expected a sequence of texts (str), got {type(texts).__name__}"
                        f"{hint if isinstance(texts, (bytes, bytearray)) else ''}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts must be strings, got {type(t).__name__} at index {i}"
                            f"{hint if isinstance(t, (bytes, bytearray)) else ''}")
        yield t
