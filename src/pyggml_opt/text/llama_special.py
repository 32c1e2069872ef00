"""The special tokens of a GGUF vocabulary as llama.cpp settles them (``llama_vocab::impl::load``): each
token's attributes (from ``tokenizer.ggml.token_type``, then the end-of-turn, fill-in-the-middle and
end-of-generation tokens it recognises by their text made control tokens, and its fixes for
particular vocabularies), the special ids (the file's ``tokenizer.ggml.<kind>_token_id`` keys, else
found by text) and the tokens that end generation (``llama_vocab_is_eog``).

Where llama.cpp takes the first of several candidate texts in its hash map's order (an end-of-turn
token when a vocabulary has both ``<|end|>`` and ``<|endoftext|>``, as Phi-3's), the first in its list
of candidates is taken here (Phi-3: ``<|end|>``, as llama.cpp); the attributes and the
end-of-generation set do not depend on that choice.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

K = "tokenizer.ggml."
# llama.h: enum llama_token_attr
UNKNOWN, UNUSED, NORMAL, CONTROL, USER_DEFINED, BYTE, NORMALIZED, LSTRIP, RSTRIP = (1 << b for b in range(9))
# llama.h: enum llama_token_type (0 undefined .. 6 byte) -> attribute
_TYPE_ATTR = {1: NORMAL, 2: UNKNOWN, 3: CONTROL, 4: USER_DEFINED, 5: UNUSED, 6: BYTE}

_DEEPSEEK_END = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # written with escapes: full-width bars, "▁"
# the kinds llama.cpp finds by text when the file names no id, in its order, with their candidate texts
FOUND_BY_TEXT: dict[str, tuple[str, ...]] = {
    "eot": ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
            "_<EOT>", "[EOT]", _DEEPSEEK_END, "<end_of_utterance>"),
    "eom": ("<|eom_id|>",),
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>", "\u2581<PRE>",
                "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uff5cfim\u2581hole\uff5c>", "<SUF>", "\u2581<SUF>",
                "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uff5cfim\u2581end\uff5c>", "<MID>", "\u2581<MID>",
                "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
# texts that end generation wherever they are (llama.cpp's list)
EOG_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
             "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
             "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", _DEEPSEEK_END, "[e~[")
# the special ids a file may name, by key (tokenizer.ggml.<kind>_token_id; the deprecated fim names too)
ID_KEYS = {"bos": "bos", "eos": "eos", "eot": "eot", "eom": "eom", "unk": "unknown", "sep": "seperator",
           "pad": "padding", "mask": "mask", "fim_pre": "fim_pre", "fim_suf": "fim_suf", "fim_mid": "fim_mid",
           "fim_pad": "fim_pad", "fim_rep": "fim_rep", "fim_sep": "fim_sep"}
_DEPRECATED = {"fim_pre": "prefix", "fim_suf": "suffix", "fim_mid": "middle"}


@dataclass(frozen=True)
class SpecialTokens:
    """``attrs``: each token's llama.cpp attribute bits; ``ids``: kind ("bos", "eos", "eot", "fim_pre"
    ...) -> id or None; ``eog``: the ids that end generation."""

    attrs: np.ndarray
    ids: dict[str, int | None]
    eog: frozenset[int]


def _key_id(keys: Mapping[str, Any], key: str, n: int) -> int | None:
    value = keys.get(f"{K}{key}_token_id")
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) < n:
        raise ValueError(f"{K}{key}_token_id is {value!r}, not a token id of the {n}")
    return int(value)


# llama.cpp's ids for a file without the keys, by tokenizer model (out of range: none)
DEFAULT_IDS = {"llama": {"bos": 1, "eos": 2, "unk": 0}, "gpt2": {"bos": 11, "eos": 11}}


def special_tokens(model: str, tokens: list[str], types: np.ndarray, keys: Mapping[str, Any],
                   ids: Mapping[str, int]) -> SpecialTokens:
    """llama.cpp's special tokens of the vocabulary ``tokens`` of ``types`` (``ids``: text -> id, the last
    of a repeated text) of tokenizer ``model`` under the file's ``keys``."""
    n = len(tokens)
    attrs = np.array([_TYPE_ATTR.get(int(t), 0) for t in types], np.int32)
    found: dict[str, int | None] = {}
    for kind, key in ID_KEYS.items():
        value = _key_id(keys, key, n)
        if value is None and kind in _DEPRECATED:
            value = _key_id(keys, _DEPRECATED[kind], n)
        default = DEFAULT_IDS.get(model, {}).get(kind)
        found[kind] = value if value is not None else default if default is not None and default < n else None
    for kind, texts in FOUND_BY_TEXT.items():
        if found[kind] is None:
            hits = [ids[t] for t in texts if t in ids]
            if hits:
                found[kind] = hits[0]
                attrs[hits[0]] |= CONTROL
    eog = {found[k] for k in ("fim_pad", "fim_rep", "fim_sep")} | {ids[t] for t in EOG_TEXTS if t in ids}
    for i in eog:
        if i is not None:
            attrs[i] |= CONTROL
    for t in ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"):  # gpt-oss's, always written
        if t in ids:
            attrs[ids[t]] = USER_DEFINED
    eog |= {found["eos"], found["eot"], found["eom"]}
    eog.discard(None)
    by_text = {tokens[i]: i for i in eog if i is not None}
    # o200k_harmony and solar-open: "<|end|>" ends a message there, not the generation
    call = "<|call|>" in by_text or "<|calls|>" in by_text
    if "<|end|>" in by_text and call and ("<|return|>" in by_text or "<|flush|>" in by_text):
        eog.discard(by_text["<|end|>"])
        attrs[by_text["<|end|>"]] = USER_DEFINED
    # gemma4 and plamo have a normal "</s>"
    if "</s>" in by_text and ("<|tool_response>" in by_text or "<|plamo:eos|>" in by_text):
        eog.discard(by_text["</s>"])
        attrs[by_text["</s>"]] = NORMAL
    return SpecialTokens(attrs, found, frozenset(i for i in eog if i is not None))


def phi3_rstrip(attrs: np.ndarray, ids: Mapping[str, int], name: str) -> None:
    """For a model named Phi-3, llama.cpp's partition drops the spaces after its special tokens (all
    but ``<unk>``, ``<s>``, ``<|endoftext|>``; ``</s>`` too): their RSTRIP bit, set in place."""
    if "phi-3" not in name and "phi3" not in name:
        return
    attrs[(attrs & (CONTROL | USER_DEFINED | UNKNOWN)) != 0] |= RSTRIP
    for t, on in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
        if t in ids:
            attrs[ids[t]] = attrs[ids[t]] | RSTRIP if on else attrs[ids[t]] & ~RSTRIP


def eog_ids(keys: Mapping[str, Any]) -> frozenset[int]:
    """The end-of-generation ids of a file's tokenizer keys (a loaded model's ``file_keys``), as
    llama.cpp collects them; empty for a vocabulary of another tokenizer model or keys that do not
    read (``GGUFTokenizer`` says why)."""
    model, tokens = keys.get(f"{K}model"), keys.get(f"{K}tokens")
    if model not in ("gpt2", "llama", "gemma4") or not isinstance(tokens, list):
        return frozenset()
    try:
        types = np.asarray(keys.get(f"{K}token_type", np.ones(len(tokens))), dtype=np.int64)
        if types.shape != (len(tokens),):
            return frozenset()
        ids = {t: i for i, t in enumerate(tokens)}
        return special_tokens(str(model), tokens, types, keys, ids).eog
    except (TypeError, ValueError):
        return frozenset()
