"""Tokenizers as llama.cpp's GGUF keys (``tokenizer.ggml.*``), and the files llama.cpp reads them from.

``vocab_metadata(tokenizer)`` gives the keys (for ``save(model, path, extra=...)`` or any GGUF
writer), ``read_vocab`` / ``load_vocab`` rebuild the tokenizer from a file, and ``save_vocab`` writes a
file of the vocabulary alone, which llama.cpp loads with ``vocab_only`` (llama-cpp-python:
``Llama(path, vocab_only=True)``): llama.cpp then reads ``general.architecture`` and the tokenizer keys
and no hyperparameter or tensor. A model file adds its architecture's hyperparameters and tensors
beside the same keys.

The two tokenizers map to two of llama.cpp's tokenizer models (``llama-vocab.cpp``):

- ``BPETokenizer`` -> model ``gpt2`` (byte-level BPE): ``tokens`` written in GPT-2's byte alphabet,
  ``merges`` as "left right" in rank order, ``token_type`` NORMAL or CONTROL (special tokens),
  pre-tokenizer ``trillion``: llama.cpp's name for GPT-2's regular expression (the one Hugging Face's
  ByteLevel pre-tokenizer applies) without the space clean-up its ``gpt-2`` entry does when
  detokenizing (" ." -> "."), so that texts round-trip.
- ``CharTokenizer`` -> model ``t5`` (SentencePiece's unigram, UGM), one token per character. Its
  Viterbi search, over single-character tokens only, takes each character as its token, and a character
  that is no token becomes the unknown id without byte tokens: the vocabulary stays the tokenizer's
  (a model's embedding rows), where SentencePiece's BPE model (``llama``) turns an unknown character into
  its UTF-8 bytes (256 more tokens; without them llama.cpp's tokenizer throws), and ``gpt2`` with merges
  inside characters drops it. Id 0 (padding) is a control token; id 1 (unknown) is the user-defined
  token "\\ufffd", which llama.cpp detokenizes as pyggml_opt decodes it (U+FFFD); spaces are written
  "▁" (U+2581), as llama.cpp escapes them; no space prefix. One difference remains: a run of several
  characters the tokenizer has not seen is one unknown id in llama.cpp (unigram's convention), one per
  character in pyggml_opt.

A tokenizer whose tokens llama.cpp cannot represent is refused here with a ValueError naming the token
(not by llama.cpp at load time, which would abort on two equal tokens): NUL characters (llama.cpp
reads tokens as C strings), text that is not UTF-8, empty tokens, and for the character tokenizer the
characters "▁" and U+FFFD, which its encoding of spaces and of the unknown id take, and U+F000 to U+FFFF,
which llama.cpp reads as the unknown id.
"""
from __future__ import annotations

import os

import numpy as np

from ..checks import check_choice
from ..core import GGUFFile
from .bpe import BPETokenizer
from .char import CharTokenizer

# llama.cpp's token types (llama.h: enum llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# pre-tokenizers under which llama.cpp splits text with GPT-2's regular expression (llama-vocab.cpp)
GPT2_REGEX_PRE = ("trillion", "gpt-2", "granite-docling", "mpt", "olmo", "jais", "phi-2")
BPE_PRE = "trillion"
SPACE = "\u2581"  # how SentencePiece models write a space
PAD_TEXT, UNKNOWN_TEXT = "<pad>", "\ufffd"
# characters llama.cpp's unigram tokenizer (llama-cpp-python 0.3.36) turns into the unknown id when
# U+FFFD is a user-defined token, found by tokenizing every character up to U+2FFFF with llama.cpp
SHADOWED = ("\uf000", "\uffff")
ARCHITECTURES = ("llama", "gpt2")  # what a vocabulary-only file may name (any llama.cpp architecture loads)

K = "tokenizer.ggml."


def vocab_metadata(tokenizer: BPETokenizer | CharTokenizer) -> dict[str, object]:
    """``tokenizer`` as llama.cpp's ``tokenizer.ggml.*`` keys, typed as llama.cpp reads them (ids
    uint32, token types int32, flags bool). ValueError naming a token llama.cpp cannot represent."""
    if isinstance(tokenizer, BPETokenizer):
        return _bpe_metadata(tokenizer)
    if isinstance(tokenizer, CharTokenizer):
        return _char_metadata(tokenizer)
    raise TypeError(f"tokenizer must be a BPETokenizer or a CharTokenizer, got {type(tokenizer).__name__}")


def _check_tokens(tokens: list[str], what: str) -> None:
    seen: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if not t:
            raise ValueError(f"{what} {i} is empty: llama.cpp cannot represent an empty token")
        if "\0" in t:
            raise ValueError(f"{what} {i} ({t!r}) contains a NUL character: llama.cpp reads tokens as C strings")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} {i} ({t!r}) is not valid UTF-8 text (a lone surrogate)") from None
        if t in seen:
            raise ValueError(f"{what} {i} ({t!r}) equals token {seen[t]}: llama.cpp aborts on two equal tokens")
        seen[t] = i


def _flags() -> dict[str, object]:
    # no id added around a text: tokenizing in llama.cpp gives what encode gives
    return {f"{K}add_bos_token": False, f"{K}add_eos_token": False}


def _bpe_metadata(tok: BPETokenizer) -> dict[str, object]:
    _check_tokens(tok.tokens, "token")
    for a, b in tok.merges:
        if " " in a or " " in b:
            raise ValueError(f"merge ({a!r}, {b!r}) holds a space: llama.cpp stores a merge as 'left right'")
    special = set(tok.special_tokens)
    types = np.array([CONTROL if t in special else NORMAL for t in tok.tokens], np.int32)
    eos = np.uint32(tok.eos_id)
    return {f"{K}model": "gpt2", f"{K}pre": BPE_PRE, f"{K}tokens": list(tok.tokens), f"{K}token_type": types,
            f"{K}merges": [f"{a} {b}" for a, b in tok.merges], f"{K}bos_token_id": eos,
            f"{K}eos_token_id": eos, f"{K}padding_token_id": eos, **_flags()}


def _char_metadata(tok: CharTokenizer) -> dict[str, object]:
    for c in (SPACE, UNKNOWN_TEXT):
        if c in tok.chars:
            raise ValueError(f"character {c!r} (id {tok.encode(c)[0]}) cannot be a token of llama.cpp's unigram "
                             f"model: it writes {'a space' if c == SPACE else 'the unknown id'} that way")
    shadowed = next((c for c in tok.chars if SHADOWED[0] <= c <= SHADOWED[1]), None)
    if shadowed is not None:
        raise ValueError(f"character {shadowed!r} (id {tok.encode(shadowed)[0]}) cannot be a token of llama.cpp's "
                         f"unigram model: llama.cpp reads every character from {SHADOWED[0]!r} to {SHADOWED[1]!r} (UTF-8 "
                         "starting with the byte 0xEF, as the unknown id's U+FFFD) as the unknown id")
    tokens = [PAD_TEXT, UNKNOWN_TEXT, *(SPACE if c == " " else c for c in tok.chars)]
    _check_tokens(tokens, "token")
    types = np.full(len(tokens), NORMAL, np.int32)
    types[:2] = CONTROL, USER_DEFINED
    return {f"{K}model": "t5", f"{K}tokens": tokens, f"{K}token_type": types,
            f"{K}scores": np.zeros(len(tokens), np.float32), f"{K}bos_token_id": np.uint32(0),
            f"{K}eos_token_id": np.uint32(0), f"{K}padding_token_id": np.uint32(0),
            f"{K}unknown_token_id": np.uint32(1), f"{K}add_space_prefix": False,
            f"{K}remove_extra_whitespaces": False, **_flags()}


def read_vocab(f: GGUFFile) -> BPETokenizer | CharTokenizer:
    """The tokenizer of an open GGUF file's ``tokenizer.ggml.*`` keys: a ``BPETokenizer`` for a
    byte-level ``gpt2`` vocabulary (any such file, GPT-2's own included), a ``CharTokenizer`` for
    ``vocab_metadata``'s character vocabulary. ValueError for other vocabularies, naming what differs."""
    model = f.get(f"{K}model")
    tokens = f.get_array(f"{K}tokens")
    if not isinstance(tokens, list):
        raise ValueError(f"the file has no string array {K}tokens (no llama.cpp vocabulary)")
    types = f.get_array(f"{K}token_type")
    if types is None:
        types = np.full(len(tokens), NORMAL, np.int32)
    if isinstance(types, list) or len(types) != len(tokens):
        raise ValueError(f"{K}token_type must be {len(tokens)} integers, one per token")
    if model == "gpt2":
        return _read_bpe(f, tokens, np.asarray(types))
    if model == "t5":
        return _read_char(tokens, np.asarray(types))
    raise ValueError(f"{K}model is {model!r}: pyggml_opt reads 'gpt2' (byte-level BPE) and its own 't5' "
                     "character vocabularies")


def _read_bpe(f: GGUFFile, tokens: list[str], types: np.ndarray) -> BPETokenizer:
    pre = f.get(f"{K}pre", "")
    if pre not in GPT2_REGEX_PRE:
        raise ValueError(f"{K}pre is {pre!r}: BPETokenizer splits text as GPT-2 does, as llama.cpp's "
                         f"pre-tokenizers {list(GPT2_REGEX_PRE)} do")
    other = [(i, int(t)) for i, t in enumerate(types) if t not in (NORMAL, CONTROL)]
    if other:
        i, t = other[0]
        raise ValueError(f"token {i} ({tokens[i]!r}) has token type {t}: BPETokenizer holds normal and "
                         "control (special) tokens only")
    merges = f.get_array(f"{K}merges")
    if not isinstance(merges, list):
        raise ValueError(f"a gpt2 vocabulary needs the string array {K}merges")
    pairs = []
    for m in merges:
        cut = m.find(" ", 1)  # where llama.cpp splits a merge
        if cut < 0:
            raise ValueError(f"merge {m!r} is not 'left right'")
        pairs.append((m[:cut], m[cut + 1:]))
    special = [tokens[i] for i in np.flatnonzero(types == CONTROL)]
    eos = f.get(f"{K}eos_token_id")
    if isinstance(eos, int) and 0 <= eos < len(tokens) and tokens[eos] in special:
        special.remove(tokens[eos])
        special.insert(0, tokens[eos])
    return BPETokenizer(tokens, pairs, special)


def _read_char(tokens: list[str], types: np.ndarray) -> CharTokenizer:
    if tokens[:2] != [PAD_TEXT, UNKNOWN_TEXT] or list(types[:2]) != [CONTROL, USER_DEFINED]:
        raise ValueError(f"not a character vocabulary of pyggml_opt: its first tokens are {tokens[:2]}, not "
                         f"{[PAD_TEXT, UNKNOWN_TEXT]} (padding, unknown)")
    chars = [" " if t == SPACE else t for t in tokens[2:]]
    bad = next((t for t in chars if len(t) != 1), None)
    if bad is not None or not (types[2:] == NORMAL).all():
        raise ValueError(f"not a character vocabulary of pyggml_opt: token {bad!r} is not one normal character")
    return CharTokenizer("".join(chars))


def load_vocab(path: str | os.PathLike[str]) -> BPETokenizer | CharTokenizer:
    """The tokenizer a GGUF file holds under llama.cpp's keys (``read_vocab``)."""
    with GGUFFile.read(path) as f:
        return read_vocab(f)


def save_vocab(path: str | os.PathLike[str], tokenizer: BPETokenizer | CharTokenizer,
               architecture: str = "llama", name: str | None = None) -> None:
    """Write a GGUF holding the vocabulary alone (``general.architecture`` and the tokenizer keys),
    which llama.cpp loads with ``vocab_only``: ``llama_cpp.Llama(path, vocab_only=True).tokenize(...)``.
    The file is replaced atomically."""
    architecture = check_choice("architecture", architecture, ARCHITECTURES)
    keys = vocab_metadata(tokenizer)
    with GGUFFile() as f:
        f.set("general.architecture", architecture)
        f.set("general.name", name or f"pyggml_opt {type(tokenizer).__name__} vocabulary")
        for key, value in keys.items():
            f.set(key, value)
        f.write(path)


__all__ = ["load_vocab", "read_vocab", "save_vocab", "vocab_metadata"]
