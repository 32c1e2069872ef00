"""llama.cpp's pre-tokenizers of byte-level BPE vocabularies: for each ``tokenizer.ggml.pre`` value, the
regular expressions that cut a text into words before the merges (``llama-vocab.cpp``,
``llm_tokenizer_bpe``'s table: each expression cuts every piece the one before it left, keeping the
matches and the text between them as pieces of their own) and the settings ``llama_vocab::impl::load``
gives it (a word that is a token taken whole, the default of ``add_bos_token``, the detokenizer's
space clean-up)."""
from __future__ import annotations

from dataclasses import dataclass

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN35 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|"
           r"\s+")
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
# words of upper case letters then lower case ones (the lookahead keeps [^a-z] / [^A-Z] to letters)
_CASED = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
_CASED_UPPER = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
_GPT4O = (f"{_CASED}{_CONTRACTIONS}?|{_CASED_UPPER}{_CONTRACTIONS}?" +
          r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_TEKKEN = f"{_CASED}|{_CASED_UPPER}" + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# written with escapes: an editor's Unicode normalisation must not change the ranges
_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_DEEPSEEK_PUNCTUATION = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
_DEEPSEEK_LETTERS = (
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-"
    "\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d"
    "\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-"
    "\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113"
    "\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149"
    "\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b"
    "\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-"
    "\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0"
    "-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+")


@dataclass(frozen=True)
class PreTokenizer:
    """How llama.cpp splits and joins text for one ``tokenizer.ggml.pre`` value of a byte-level BPE
    vocabulary."""

    regexes: tuple[str, ...]
    ignore_merges: bool = False  # a word that is a token is taken whole (Llama 3's, Tekken's)
    add_bos: bool = False        # the default of tokenizer.ggml.add_bos_token
    clean_spaces: bool = True    # decode drops spaces before punctuation and around apostrophes


def _same(names: str, pre: PreTokenizer) -> dict[str, PreTokenizer]:
    return dict.fromkeys(names.split(), pre)


# tokenizer.ggml.pre -> what llama.cpp does for it; a file without the key is "default"
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    "default": PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]")),
    **_same("llama3 llama-v3 llama-bpe", PreTokenizer((_LLAMA3,), ignore_merges=True, add_bos=True)),
    **_same("smaug-bpe dbrx", PreTokenizer((_LLAMA3,))),
    **_same("qwen2 deepseek-r1-qwen", PreTokenizer((_QWEN2,), clean_spaces=False)),
    "qwen35": PreTokenizer((_QWEN35,), clean_spaces=False),
    **_same("gpt-2 phi-2 mpt olmo", PreTokenizer((_GPT2,))),
    "trillion": PreTokenizer((_GPT2,), clean_spaces=False),
    "deepseek-llm": PreTokenizer(("[\r\n]", _DEEPSEEK_LETTERS, _DEEPSEEK_PUNCTUATION, r"\s+$", _CJK,
                                  r"\p{N}+"), clean_spaces=False),
    "deepseek-coder": PreTokenizer(("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}"), clean_spaces=False),
    "falcon": PreTokenizer((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
    **_same("starcoder refact", PreTokenizer((r"\p{N}", _GPT2))),
    **_same("command-r smollm", PreTokenizer((r"\p{N}", _GPT2), clean_spaces=False)),
    **_same("gpt-4o llama4", PreTokenizer((_GPT4O,), clean_spaces=False)),
    "tekken": PreTokenizer((_TEKKEN,), ignore_merges=True, add_bos=True, clean_spaces=False),
}
