"""The tokenizer a GGUF file carries (``tokenizer.ggml.*``), giving llama.cpp's ids token for token.

``GGUFTokenizer.from_file(path)`` reads a file's keys; ``GGUFTokenizer(model.file_keys)`` takes those of
the file a model was loaded from. What llama.cpp does (``src/llama-vocab.cpp``), kept here:

- Byte-level BPE (tokenizer model ``gpt2``) runs in Hugging Face ``tokenizers``, which represents it
  exactly: its BPE model over the file's tokens and merges (by rank), the pre-tokenizer's regular
  expressions from llama.cpp's table (``llama_pretokenizers.py``) as ``Split``s that isolate each match,
  then its ``ByteLevel`` mapping of bytes to GPT-2's alphabet without a regular expression of its own,
  no normaliser. Some pre-tokenizers look a whole word up before merging (``ignore_merges``).
- SentencePiece vocabularies (model ``llama``: Llama 2, Mistral, Phi-3, Gemma) have scores, not
  merges: llama.cpp merges, over the whole text with its spaces written "▁" (and one put before it,
  ``add_space_prefix``), the adjacent pair whose joined text is the token of highest score, then
  spells a character no token holds as byte tokens ``<0xXX>``. That is a BPE whose merges are every
  pair of tokens that joins into a token, ranked by the joined token's score: ``tokenizers``' BPE
  runs it, with byte fallback. The tie llama.cpp breaks by position (two candidate pairs joining into
  tokens of equal score) is broken here by rank; the golden cases and 1 MB of text give equal ids.
- Gemma 4's BPE (model ``gemma4``): merges over raw UTF-8 with spaces written "▁", the text cut into
  lines and runs of newlines (a run that is a token taken whole), byte fallback.
- Special tokens are split out of the text first, the longest first, as llama.cpp's partition does:
  user-defined ones always, control and unknown ones when ``parse_special`` (``llama_tokenize``'s);
  Phi-3's strip the spaces after them. ``add_special`` adds the beginning / end of text ids where the
  file (or the model's default) says so.
- ``decode`` writes each token's bytes (a control token's text only with ``special``), drops the space
  a SentencePiece tokenizer put before the text, and for the pre-tokenizers that ask for it
  (``clean_spaces``) drops the spaces before ``?!.,`` and around apostrophes as llama.cpp's detokenizer
  does; invalid UTF-8 (a character cut between tokens) decodes to U+FFFD.
"""
from __future__ import annotations

import os
import re
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..core import GGUFFile
from .bpe import _tokenizers
from .byte_level import BYTE_CHARS, byte_level_bytes
from .extra import text_extra
from .chat_template import ChatTemplate
from .llama_pretokenizers import PRE_TOKENIZERS, PreTokenizer
from .llama_special import BYTE, CONTROL, NORMAL, RSTRIP, UNKNOWN, USER_DEFINED, phi3_rstrip, special_tokens

K = "tokenizer.ggml."
NORMAL_TYPE = 1  # llama.h: LLAMA_TOKEN_TYPE_NORMAL, a token_type array's default
MODELS = ("gpt2", "llama", "gemma4")  # the tokenizer.ggml.model values read
SPACE = "\u2581"  # "▁": a space in SentencePiece-style tokens
_NEWLINES = re.compile("(\n+)")
SPM_CHUNK = 1 << 20  # characters of a SentencePiece text merged at a time (where it can be cut)
SPM_MAX = 1 << 24    # characters merged at once at most (~2.4 GB)
WORD_CACHE = 1 << 20  # words whose ids are kept (then forgotten at once): a repeated word is looked up


def _regex() -> Any:
    return text_extra("regex", "GGUFTokenizer")


def _strings(keys: Mapping[str, Any], name: str) -> list[str] | None:
    """Key ``tokenizer.ggml.<name>``: a list of str, or None where absent (TypeError for another value)."""
    value = keys.get(f"{K}{name}")
    if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        raise TypeError(f"{K}{name} must be a string array, got {type(value).__name__}")
    return value


def _flag(keys: Mapping[str, Any], name: str, default: bool) -> bool:
    """Key ``tokenizer.ggml.<name>``: a bool, ``default`` where absent (TypeError for another value)."""
    value = keys.get(f"{K}{name}", default)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{K}{name} must be a bool, got {value!r}")
    return bool(value)


def _score_merges(tokens: list[str], scores: np.ndarray) -> list[tuple[str, str]]:
    """Every pair of tokens whose joined text is a token, the pairs joining into higher-scored tokens
    first (ties by token id, then by where the token is cut)."""
    ids = {t: i for i, t in enumerate(tokens)}
    found = []
    for i, t in enumerate(tokens):
        for k in range(1, len(t)):
            if t[:k] in ids and t[k:] in ids:
                found.append((-float(scores[i]), i, k))
    found.sort()
    return [(tokens[i][:k], tokens[i][k:]) for _, i, k in found]


class GGUFTokenizer:
    """Texts <-> the token ids of a GGUF file's vocabulary, as llama.cpp computes them (see the module).

    ``keys``: the file's ``tokenizer.*`` keys (others are ignored but ``general.name``, which picks
    Phi-3's special-token handling as llama.cpp's does), as ``GGUFFile.get_typed`` reads them or a
    model's ``file_keys`` holds them. ValueError for a tokenizer model or pre-tokenizer llama.cpp has and
    this class does not (naming the supported ones) or inconsistent keys."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        model = keys.get(f"{K}model")
        if not isinstance(model, str) or model not in MODELS:
            raise ValueError(f"{K}model is {model!r}; GGUFTokenizer reads {list(MODELS)}")
        self.model = model
        pre = keys.get(f"{K}pre", "default")
        if model == "gpt2" and (not isinstance(pre, str) or pre not in PRE_TOKENIZERS):
            raise ValueError(f"{K}pre is {pre!r}; GGUFTokenizer reads {sorted(PRE_TOKENIZERS)}")
        tokens = _strings(keys, "tokens")
        if not tokens:
            raise ValueError(f"a {model} vocabulary needs the string array {K}tokens")
        # llama.cpp names an empty token so (it would match everywhere)
        self.tokens = [t or f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        self.types = self._array(keys, "token_type", NORMAL_TYPE).astype(np.int32)
        self._ids = {t: i for i, t in enumerate(self.tokens)}  # a repeated text: its last id, as llama.cpp's map
        special = special_tokens(self.model, self.tokens, self.types, keys, self._ids)
        self.attrs, self.special_ids, self.eog_ids = special.attrs, special.ids, special.eog
        phi3_rstrip(self.attrs, self._ids, str(keys.get("general.name", "")).lower())
        self.bos_id, self.eos_id = special.ids["bos"], special.ids["eos"]
        # what llama.cpp's load gives each model
        self.pre: PreTokenizer | None = PRE_TOKENIZERS[pre] if model == "gpt2" else None
        add_bos = self.pre.add_bos if self.pre is not None else True
        self.add_bos = (model == "gemma4" or _flag(keys, "add_bos_token", add_bos)) and self.bos_id is not None
        self.add_eos = _flag(keys, "add_eos_token", False) and self.eos_id is not None
        self.add_space_prefix = _flag(keys, "add_space_prefix", model == "llama")
        self.escape_spaces = model != "gpt2"
        self.clean_spaces = self.pre.clean_spaces if self.pre is not None else model == "gemma4"
        self._bpe = self._bpe_model(keys)
        # byte-level BPE: llama.cpp's expressions run in the regex module (the captured split keeps the
        # text between matches); 5x faster than tokenizers' Split
        self._regexes = [_regex().compile(f"({r})") for r in (self.pre.regexes if self.pre is not None else ())]
        self._word_cache: dict[str, list[int]] = {}
        source = keys.get("tokenizer.chat_template")
        if source is not None and not isinstance(source, str):
            raise TypeError(f"tokenizer.chat_template must be a str, got {type(source).__name__}")
        self._chat_source: str | None = source
        self._chat: ChatTemplate | None = None
        # SentencePiece: the characters (of those that end lines and sentences) no merge joins
        joined = {c for t in self.tokens if len(t) > 1 for c in t} if self.model == "llama" else set()
        self._solo = [c for c in "\n\r\t.,;!?" if self.model == "llama" and c not in joined]
        # the partition's order: longest text first (ties by id)
        cut = np.flatnonzero(self.attrs & (CONTROL | USER_DEFINED | UNKNOWN)).tolist()
        self._special = sorted(cut, key=lambda i: -len(self.tokens[i].encode()))

    def _array(self, keys: Mapping[str, Any], name: str, default: float) -> np.ndarray:
        try:
            values = np.asarray(keys.get(f"{K}{name}", np.full(len(self.tokens), default)), dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{K}{name} must be an array of numbers") from None
        if values.shape != (len(self.tokens),):
            raise ValueError(f"{K}{name} has {values.size} entries for {len(self.tokens)} tokens")
        return values

    def _bpe_model(self, keys: Mapping[str, Any]) -> Any:
        """The ``tokenizers`` BPE that merges as llama.cpp does for this model."""
        tk, ids = _tokenizers(), self._ids
        if self.model == "llama":
            scores = self._array(keys, "scores", 0.0)
            return tk.Tokenizer(tk.models.BPE(ids, _score_merges(self.tokens, scores), byte_fallback=True))
        merges = _strings(keys, "merges")
        if merges is None:
            raise ValueError(f"a {self.model} vocabulary needs the string array {K}merges")
        # llama.cpp cuts a merge at its first space after the first character (a merge of "▁" tokens)
        pairs = [(m[:cut], m[cut + 1:]) for m in merges for cut in [m.find(" ", 1)]]
        unknown = next((m for m, (a, b) in zip(merges, pairs) if a not in ids or b not in ids), None)
        if unknown is not None:
            raise ValueError(f"{K}merges names tokens the vocabulary lacks: {unknown!r}")
        if self.pre is None:  # gemma4: raw UTF-8
            return tk.models.BPE(ids, pairs, byte_fallback=True)
        return tk.models.BPE(ids, pairs, ignore_merges=self.pre.ignore_merges)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> "GGUFTokenizer":
        """The tokenizer of a GGUF file (a model or a vocabulary-only file)."""
        with GGUFFile.read(path) as f:
            return cls({k: f.get_typed(k) for k in f.keys() if k.startswith("tokenizer.") or k == "general.name"})

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> np.ndarray:
        """The ids of ``text`` (int32), as ``llama_tokenize(vocab, text, add_special, parse_special)``:
        the beginning / end of text ids where the file says (``add_special``), special tokens written in
        the text taken as such only with ``parse_special`` (user-defined ones always)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            text.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 for llama.cpp or tokenizers
            raise ValueError(f"text is not valid Unicode: {exc}") from None
        ids: list[int] = [self.bos_id] if add_special and self.add_bos and self.bos_id is not None else []
        after_special = True  # a SentencePiece text gets its space prefix at the start and after a special token
        for piece in self._partition(text, parse_special):
            if isinstance(piece, int):
                ids.append(piece)
                after_special = True
            elif piece:
                ids.extend(self._encode_text(piece, after_special))
                after_special = False
        if add_special and self.add_eos and self.eos_id is not None:
            ids.append(self.eos_id)
        return np.array(ids, np.int32)

    def _encode_text(self, text: str, after_special: bool) -> list[int]:
        if self.model == "llama":  # the whole text is one word
            if self.add_space_prefix and after_special:
                text = " " + text
            return [i for chunk in self._spm_chunks(text.replace(" ", SPACE))
                    for i in self._bpe.encode(chunk, add_special_tokens=False).ids]
        ids: list[int] = []
        cache = self._word_cache
        for word in self._words(text):
            hit = cache.get(word)
            if hit is None:
                if len(cache) >= WORD_CACHE:
                    cache.clear()
                hit = cache[word] = self._word_ids(word)
            ids.extend(hit)
        return ids

    def _spm_chunks(self, text: str) -> list[str]:
        """A SentencePiece text in pieces of about ``SPM_CHUNK`` characters, each cut just after a character
        no token of two or more characters holds (no merge crosses it: the ids are those of the whole
        text), so that a long text's merges need memory for one piece at a time (10 MB whole: 1.5 GB).
        ValueError for a piece that cannot be cut below ``SPM_MAX`` characters."""
        chunks, start = [], 0
        while len(text) - start > SPM_CHUNK:
            lo, hi = start + SPM_CHUNK // 2, start + SPM_CHUNK
            cut = max((text.rfind(c, lo, hi) for c in self._solo), default=-1)
            if cut < 0:
                cut = min((i for i in (text.find(c, hi) for c in self._solo) if i >= 0), default=len(text) - 1)
            if cut + 1 - start > SPM_MAX:
                raise ValueError(f"a text of {len(text)} characters with no line break in {SPM_MAX}: llama.cpp's "
                                 f"SentencePiece merges it whole (memory ~150 bytes a character); cut it into lines")
            chunks.append(text[start:cut + 1])
            start = cut + 1
        chunks.append(text[start:])
        return [c for c in chunks if c]

    def _words(self, text: str) -> list[str]:
        """``text`` cut into the words merged one by one: by each of the pre-tokenizer's expressions in
        turn (the matches and the text between them), or Gemma 4's lines and runs of newlines."""
        if self.pre is None:
            return [w for w in _NEWLINES.split(text.replace(" ", SPACE)) if w]
        words = [text]
        for rx in self._regexes:
            # split gives each gap, then the whole match and the expression's own groups: keep the first two
            step = rx.groups + 1
            words = [w for piece in words for k, w in enumerate(rx.split(piece)) if w and k % step < 2]
        return words

    def _word_ids(self, word: str) -> list[int]:
        """The ids of one word (the BPE's merges)."""
        if self.pre is not None:  # byte-level: the word's bytes as GPT-2's characters
            word = "".join(map(BYTE_CHARS.__getitem__, word.encode()))
        elif word[0] == "\n" and word in self._ids:  # Gemma 4: a run of newlines that is a token
            return [self._ids[word]]
        return [t.id for t in self._bpe.tokenize(word)]

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        """``text`` cut around the special tokens it holds (their ids), each token in turn, longest first."""
        pieces: list[str | int] = [text]
        for i in self._special:
            if not parse_special and self.attrs[i] & (CONTROL | UNKNOWN):
                continue
            word = self.tokens[i]
            if not any(isinstance(p, str) and word in p for p in pieces):
                continue
            cut: list[str | int] = []
            for p in pieces:
                if isinstance(p, int) or word not in p:
                    cut.append(p)
                    continue
                for j, part in enumerate(p.split(word)):
                    if j:
                        cut.append(i)
                        if self.attrs[i] & RSTRIP:
                            part = part.lstrip(" \t\n\v\f\r")
                    cut.append(part)
            pieces = cut
        return pieces

    @property
    def chat_template(self) -> ChatTemplate | None:
        """The file's chat template (``tokenizer.chat_template``; None without one), its ``bos_token`` /
        ``eos_token`` this vocabulary's, its turns ending at the end-of-generation tokens."""
        if self._chat is None and self._chat_source is not None:
            text = {k: self.tokens[i] if i is not None else "" for k, i in (("bos", self.bos_id), ("eos", self.eos_id))}
            self._chat = ChatTemplate(self._chat_source, text["bos"], text["eos"], "tokenizer.chat_template",
                                      end_of_turn=[self.tokens[i] for i in sorted(self.eog_ids)])
        return self._chat

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False,
                            tokenize: bool = True, return_assistant_mask: bool = False,
                            chat_template: str | None = None, **kwargs: Any) -> Any:
        """``messages`` (dicts with "role" and "content") as the file's chat template renders them (as
        transformers' ``apply_chat_template``, whose arguments these are: ``tools``, ``documents`` and
        other ``kwargs`` reach the template): the text (``tokenize=False``) or its ids, special tokens in
        it parsed as such and none added (the template writes them). With ``return_assistant_mask``,
        (ids, mask): mask[k] = 1 for the tokens of the assistant's turns (``ChatTemplate.spans``), the
        tokens a fine-tune learns to write. ``chat_template``: another template's text. ValueError
        without a template."""
        template: ChatTemplate | None
        if chat_template is not None:
            base = self.chat_template
            template = ChatTemplate(chat_template, base.special["bos_token"] if base else "",
                                    base.special["eos_token"] if base else "", "chat_template",
                                    end_of_turn=[self.tokens[i] for i in sorted(self.eog_ids)])
        else:
            template = self.chat_template
        if template is None:
            raise ValueError(f"this vocabulary has no tokenizer.chat_template: give apply_chat_template(chat_template=...)")
        if not return_assistant_mask:
            text = template.render(messages, add_generation_prompt, **kwargs)
            return self.encode(text, add_special=False, parse_special=True) if tokenize else text
        if add_generation_prompt:
            raise ValueError("return_assistant_mask marks a whole conversation's turns: add_generation_prompt=False")
        text, spans = template.spans(messages, **kwargs)
        ids = self.encode(text, add_special=False, parse_special=True)
        return ids, self._span_mask(text, ids, spans)

    def _span_mask(self, text: str, ids: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
        """1 for each of ``ids`` (the tokens of ``text``) that overlaps a character span of ``spans``."""
        data = text.encode()
        bounds = [(len(text[:a].encode()), len(text[:b].encode())) for a, b in spans]
        mask = np.zeros(len(ids), np.int32)
        at = 0
        for k, i in enumerate(ids.tolist()):
            piece = self._piece(i, special=True)
            while not data.startswith(piece, at):
                if piece.startswith(b" ") and data.startswith(piece[1:], at):
                    piece = piece[1:]  # the space a SentencePiece text gets after a special token
                elif data[at:at + 1].isspace():
                    at += 1  # whitespace the partition strips around a special token (Phi-3's)
                else:
                    raise ValueError(f"token {k} ({self.tokens[i]!r}) does not spell the text at byte {at}")
            end = at + len(piece)
            mask[k] = any(a < end and at < b for a, b in bounds) if piece else any(a <= at < b for a, b in bounds)
            at = end
        return mask

    def decode(self, ids: ArrayLike, special: bool = False) -> str:
        """The text of ``ids``, as llama.cpp's detokenizer writes it: control tokens only with ``special``."""
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(f"ids must be a 1-d sequence of integer ids, got {arr.dtype} {arr.shape}")
        if arr.size and (arr.min() < 0 or arr.max() >= len(self.tokens)):
            raise ValueError(f"ids must be in [0, {len(self.tokens)}), got {int(arr.min())}..{int(arr.max())}")
        out = bytearray()
        for n, i in enumerate(arr.tolist()):
            piece = self._piece(i, special)
            if n == 0 and self.add_space_prefix and piece.startswith(b" "):
                piece = piece[1:]  # the space the tokenizer put before the text
            out += piece
        data = bytes(out)
        if self.clean_spaces:
            data = _clean_spaces(data)
        return data.decode("utf-8", errors="replace")

    def _piece(self, i: int, special: bool) -> bytes:
        """Token ``i``'s bytes (llama.cpp's token_to_piece)."""
        attr, text = self.attrs[i], self.tokens[i]
        if attr & (CONTROL | UNKNOWN):
            return text.encode() if special else b""
        if attr & USER_DEFINED:
            return text.encode()
        if attr & NORMAL:
            return text.replace(SPACE, " ").encode() if self.escape_spaces else byte_level_bytes(text)
        if attr & BYTE:
            return bytes([int(text[3:5], 16)])
        return b""


def _clean_spaces(text: bytes) -> bytes:
    """llama.cpp's detokenizer's clean-up (clean_spaces): " ?", " !", " .", " ," lose their space, a
    single apostrophe between spaces loses both, " 's" / " 'm" / " 're" / " 've" theirs."""
    for p in b"?!.,":
        text = text.replace(b" " + bytes([p]), bytes([p]))
    text = text.replace(b" ' ", b"'")
    for tail in (b"'s", b"'m", b"'re", b"'ve"):
        text = text.replace(b" " + tail, tail)
    return text
