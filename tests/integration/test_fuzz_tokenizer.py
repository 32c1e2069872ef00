"""Hostile tokenizer keys: ``GGUFTokenizer`` built from mutated ``tokenizer.*`` keys of real vocabularies
(llama.cpp's ggml-vocab-llama-spm, -gpt-2 and -gemma-4: SentencePiece, byte-level BPE, Gemma 4's BPE)
either refuses them with a ValueError or TypeError, or encodes and decodes texts (special tokens, NUL,
emoji, nothing) and ids; never another exception, a crash or a hang (each case under an alarm). The
mutations are drawn from a fixed seed per vocabulary, so a failure replays."""
from __future__ import annotations

import signal

import numpy as np
import pytest

import pyggml_opt as pgo
from support import import_or_skip
from support.hf_models import llama_cpp_source

import_or_skip("tokenizers", "GGUFTokenizer runs its merges in Hugging Face tokenizers")
import_or_skip("regex", "GGUFTokenizer pre-tokenizes with the regex module")

CASES = {"llama-spm": 60, "gpt-2": 60, "gemma-4": 8}
TEXTS = ["", "Hello world!", " <s> </s> <|endoftext|> <unk> x", "nul\x00byte", "😀👍🏽 日本語 ", "\n\n\t  a  "]
ODD_VALUES = [None, "", "x", -1, 2**40, 1.5, float("nan"), [], [1, 2], ["a", 3], np.array([1.0, 2.0]), True]


def mutate(keys: dict, rng: np.random.Generator) -> dict:
    """``keys`` with one to three hostile changes."""
    keys = dict(keys)
    for _ in range(rng.integers(1, 4)):
        key = str(rng.choice(sorted(keys)))
        value = keys[key]
        kind = rng.integers(6)
        if kind == 0:
            del keys[key]
        elif kind == 1:
            keys[key] = ODD_VALUES[rng.integers(len(ODD_VALUES))]
        elif isinstance(value, list) and value:
            items = list(value)
            i = int(rng.integers(len(items)))
            if kind == 2:
                keys[key] = items[:int(rng.integers(len(items)))]
            elif kind == 3:
                items[i] = ["", "\x00", " ", "a b c", items[-1], 7, None][rng.integers(7)]
                keys[key] = items
            else:
                keys[key] = items + items[:int(rng.integers(1, 5))]
        elif isinstance(value, np.ndarray) and value.size:
            arr = value.copy()
            if kind == 2:
                keys[key] = arr[:int(rng.integers(arr.size))]
            else:
                arr[rng.integers(arr.size, size=5)] = [-7, 99, 2**30, 0, 6][rng.integers(5)] if arr.dtype.kind in "iu" \
                    else [np.nan, np.inf, -np.inf, 1e30, 0.0][rng.integers(5)]
                keys[key] = arr
        else:
            keys[key] = ODD_VALUES[rng.integers(len(ODD_VALUES))]
    return keys


def _alarm(signum, frame):
    raise TimeoutError("a tokenizer case took over 20 s")


@pytest.mark.parametrize("name", sorted(CASES))
def test_mutated_tokenizer_keys_are_refused_or_work(name):
    with pgo.core.GGUFFile.read(llama_cpp_source() / "models" / f"ggml-vocab-{name}.gguf") as f:
        keys = {k: f.get_typed(k) for k in f.keys() if k.startswith("tokenizer.ggml.") or k == "general.name"}
    rng = np.random.default_rng(20261207)
    outcomes = {"refused": 0, "worked": 0}
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in range(CASES[name]):
            bad = mutate(keys, rng)
            signal.alarm(20)
            try:
                try:
                    tok = pgo.text.GGUFTokenizer(bad)
                except (ValueError, TypeError) as exc:
                    assert "tokenizer.ggml." in str(exc), f"an error that names no key: {exc}"
                    outcomes["refused"] += 1
                    continue
                for text in TEXTS:
                    for parse_special in (False, True):
                        ids = tok.encode(text, parse_special=parse_special)
                        assert ids.dtype == np.int32 and ((0 <= ids) & (ids < tok.vocab_size)).all()
                        tok.decode(ids, special=parse_special)
                tok.decode(rng.integers(tok.vocab_size, size=50))
                outcomes["worked"] += 1
            except Exception as exc:  # anything else is a defect: say which keys the case changed
                changed = sorted(k for k in bad.keys() | keys.keys() if k not in bad or k not in keys or bad[k] is not keys[k])
                raise AssertionError(f"case {case}: {type(exc).__name__}: {exc} (keys changed: {changed})") from exc
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert outcomes["refused"] > 0 and outcomes["worked"] > 0, outcomes
