"""The tokenizer a GGUF file carries (``tokenizer.ggml.*``), giving llama.cpp's ids token for token.

``GGUFTokenizer.from_file(path)`` reads a file's keys; ``GGUFTokenizer(model.file_keys)`` takes those of
the file a model was loaded from. What llama.cpp does (``src/llama-vocab.cpp``), kept here:

- Byte-level BPE (tokenizer model ``gpt2``) runs in Hugging Face ``tokenizers``, which represents it
  exactly: its BPE model over the file's tokens and merges (by rank), the pre-tokenizer's regular
  expression from llama.cpp's table (``PRE_TOKENIZERS``) as a ``Split`` that isolates each match, then
  its ``ByteLevel`` mapping of bytes to GPT-2's alphabet without a regular expression of its own, no
  normaliser. Some pre-tokenizers look a whole word up before merging (``ignore_merges``: Llama 3's).
- Special tokens are split out of the text first, the longest first, as llama.cpp's partition does:
  user-defined ones always, control and unknown ones when ``parse_special`` (``llama_tokenize``'s).
  ``add_special`` adds the beginning / end of text ids where the file (or the pre-tokenizer's
  default) says so.
- ``decode`` writes each token's bytes (a control token's text only with ``special``), and for the
  pre-tokenizers that ask for it (``clean_spaces``) drops the spaces before ``?!.,`` and around
  apostrophes as llama.cpp's detokenizer does; invalid UTF-8 (a character cut between tokens) decodes
  to U+FFFD.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from numpy.typing import ArrayLike

from ..core import GGUFFile
from .bpe import _tokenizers

K = "tokenizer.ggml."
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4  # llama.h: enum llama_token_type

# llama.cpp's pre-tokenizing regular expressions (llama-vocab.cpp, llama_vocab::impl::init_tokenizer)
_LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"


@dataclass(frozen=True)
class PreTokenizer:
    """How llama.cpp splits and joins text for one ``tokenizer.ggml.pre`` value."""

    regex: str
    ignore_merges: bool = False  # a word that is a token is taken whole (llama.cpp's Llama 3 pre-tokenizer)
    add_bos: bool = False        # the default of tokenizer.ggml.add_bos_token
    clean_spaces: bool = True    # decode drops spaces before punctuation and around apostrophes


# tokenizer.ggml.pre -> what llama.cpp does for it (BPE vocabularies)
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe"), PreTokenizer(_LLAMA3, ignore_merges=True, add_bos=True)),
    **dict.fromkeys(("smaug-bpe", "dbrx"), PreTokenizer(_LLAMA3)),  # Llama 3's expression without its defaults
    "qwen2": PreTokenizer(_QWEN2, clean_spaces=False),
    **dict.fromkeys(("gpt-2", "phi-2", "mpt"), PreTokenizer(_GPT2)),
    **dict.fromkeys(("trillion", "olmo"), PreTokenizer(_GPT2, clean_spaces=False)),
}
MODELS = ("gpt2",)  # the tokenizer.ggml.model values read


def _byte_decoder() -> dict[str, int]:
    """GPT-2's alphabet: the character standing for each byte in a byte-level BPE token's text."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTES = _byte_decoder()


class GGUFTokenizer:
    """Texts <-> the token ids of a GGUF file's vocabulary, as llama.cpp computes them (see the module).

    ``keys``: the file's ``tokenizer.*`` keys (others are ignored), as ``GGUFFile.get_typed`` reads them
    or a model's ``file_keys`` holds them. ValueError for a tokenizer model or pre-tokenizer llama.cpp
    has and this class does not (naming the supported ones) or inconsistent keys."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        model, pre = keys.get(f"{K}model"), keys.get(f"{K}pre", "default")
        if model not in MODELS:
            raise ValueError(f"{K}model is {model!r}; GGUFTokenizer reads {list(MODELS)}")
        if pre not in PRE_TOKENIZERS:
            raise ValueError(f"{K}pre is {pre!r}; GGUFTokenizer reads {sorted(PRE_TOKENIZERS)}")
        tokens = keys.get(f"{K}tokens")
        merges = keys.get(f"{K}merges")
        if not isinstance(tokens, list) or not tokens or not isinstance(merges, list):
            raise ValueError(f"a {model} vocabulary needs the string arrays {K}tokens and {K}merges")
        types = np.asarray(keys.get(f"{K}token_type", np.full(len(tokens), NORMAL)))
        if types.shape != (len(tokens),):
            raise ValueError(f"{K}token_type has {types.size} entries for {len(tokens)} tokens")
        self.tokens, self.types, self.pre = tokens, types.astype(np.int32), PRE_TOKENIZERS[pre]
        self.bos_id, self.eos_id = (self._id(keys, f"{K}{w}_token_id") for w in ("bos", "eos"))
        self.add_bos = bool(keys.get(f"{K}add_bos_token", self.pre.add_bos)) and self.bos_id is not None
        self.add_eos = bool(keys.get(f"{K}add_eos_token", False)) and self.eos_id is not None
        ids = {t: i for i, t in enumerate(tokens)}
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        unknown = next((m for m, p in zip(merges, pairs) if len(p) != 2 or p[0] not in ids or p[1] not in ids), None)
        if unknown is not None:
            raise ValueError(f"{K}merges names tokens the vocabulary lacks: {unknown!r}")
        tk = _tokenizers()
        self._bpe = tk.Tokenizer(tk.models.BPE(ids, pairs, ignore_merges=self.pre.ignore_merges))
        self._bpe.pre_tokenizer = tk.pre_tokenizers.Sequence([
            tk.pre_tokenizers.Split(tk.Regex(self.pre.regex), behavior="isolated"),
            tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        # the partition's order: longest text first (ties by id)
        special = [i for i, t in enumerate(self.types) if t in (CONTROL, USER_DEFINED, UNKNOWN)]
        self._special = sorted(special, key=lambda i: -len(tokens[i].encode()))

    def _id(self, keys: Mapping[str, Any], key: str) -> int | None:
        value = keys.get(key)
        if value is None:
            return None
        if not isinstance(value, (int, np.integer)) or not 0 <= int(value) < len(self.tokens):
            raise ValueError(f"{key} is {value!r}, not a token id of the {len(self.tokens)}")
        return int(value)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> "GGUFTokenizer":
        """The tokenizer of a GGUF file (a model or a vocabulary-only file)."""
        with GGUFFile.read(path) as f:
            return cls({k: f.get_typed(k) for k in f.keys() if k.startswith("tokenizer.")})

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> np.ndarray:
        """The ids of ``text`` (int32), as ``llama_tokenize(vocab, text, add_special, parse_special)``:
        the beginning / end of text ids where the file says (``add_special``), special tokens written in
        the text taken as such only with ``parse_special`` (user-defined ones always)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids: list[int] = [self.bos_id] if add_special and self.add_bos and self.bos_id is not None else []
        for piece in self._partition(text, parse_special):
            if isinstance(piece, int):
                ids.append(piece)
            elif piece:
                ids.extend(self._bpe.encode(piece, add_special_tokens=False).ids)
        if add_special and self.add_eos and self.eos_id is not None:
            ids.append(self.eos_id)
        return np.array(ids, np.int32)

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        """``text`` cut around the special tokens it holds (their ids), each token in turn, longest first."""
        pieces: list[str | int] = [text]
        for i in self._special:
            if not parse_special and self.types[i] != USER_DEFINED:
                continue
            word = self.tokens[i]
            if not word or not any(isinstance(p, str) and word in p for p in pieces):
                continue
            cut: list[str | int] = []
            for p in pieces:
                if isinstance(p, int) or word not in p:
                    cut.append(p)
                    continue
                for j, part in enumerate(p.split(word)):
                    if j:
                        cut.append(i)
                    cut.append(part)
            pieces = cut
        return pieces

    def decode(self, ids: ArrayLike, special: bool = False) -> str:
        """The text of ``ids``, as llama.cpp's detokenizer writes it: control tokens only with ``special``."""
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(f"ids must be a 1-d sequence of integer ids, got {arr.dtype} {arr.shape}")
        if arr.size and (arr.min() < 0 or arr.max() >= len(self.tokens)):
            raise ValueError(f"ids must be in [0, {len(self.tokens)}), got {int(arr.min())}..{int(arr.max())}")
        out = bytearray()
        for i in arr.tolist():
            kind, text = self.types[i], self.tokens[i]
            if kind == NORMAL:
                out += bytes(BYTES[c] for c in text) if all(c in BYTES for c in text) else text.encode()
            elif kind == USER_DEFINED or (kind in (CONTROL, UNKNOWN) and special):
                out += text.encode()
        data = bytes(out)
        if self.pre.clean_spaces:
            data = _clean_spaces(data)
        return data.decode("utf-8", errors="replace")


def _clean_spaces(text: bytes) -> bytes:
    """llama.cpp's detokenizer's clean-up (clean_spaces): " ?", " !", " .", " ," lose their space, a
    single apostrophe between spaces loses both, " 's" / " 'm" / " 're" / " 've" theirs."""
    for p in b"?!.,":
        text = text.replace(b" " + bytes([p]), bytes([p]))
    text = text.replace(b" ' ", b"'")
    for tail in (b"'s", b"'m", b"'re", b"'ve"):
        text = text.replace(b" " + tail, tail)
    return text
