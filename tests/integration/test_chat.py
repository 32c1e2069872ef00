"""Chatting with a GGUF model: ``generate`` ends at the vocabulary's end-of-generation tokens (those of a
``GGUFTokenizer``, or of the file the model came from) unless ``ignore_eos``, streams text pieces that
never split a character, and ``examples/chat.py`` keeps a conversation through the file's chat template.

The model: a ``llama`` with random weights over Qwen2.5's real vocabulary and chat template (llama.cpp's
``ggml-vocab-qwen2.gguf`` from the llama-cpp-python 0.3.36 sdist), saved for llama.cpp. Random weights
never choose an end-of-turn token on cue, so the tests make one of the tokens the model picks greedily
the file's end-of-text token (``tokenizer.ggml.eos_token_id``, which llama.cpp counts as an
end-of-generation token), and check that everything stops there."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import GGUFFile
from support import import_or_skip
from support.hf_models import llama_cpp_source

import_or_skip("jinja2", "chat templates render in Jinja2")
import_or_skip("tokenizers", "GGUFTokenizer runs its merges in Hugging Face tokenizers")

ROOT = Path(__file__).resolve().parents[2]
EOS = "tokenizer.ggml.eos_token_id"
HELLO = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def chat_keys():
    with GGUFFile.read(llama_cpp_source() / "models" / "ggml-vocab-qwen2.gguf") as f:
        return {k: f.get_typed(k) for k in f.keys() if k.startswith("tokenizer.")}


@pytest.fixture(scope="module")
def chat_model(chat_keys, tmp_path_factory):
    """(path, model, tokenizer): the model saved with the vocabulary and template, loaded back."""
    model = pgo.models.llama(len(chat_keys["tokenizer.ggml.tokens"]), 64, 16, 1, 2)
    model.file_keys = dict(chat_keys)
    path = tmp_path_factory.mktemp("chat") / "chat.gguf"
    model.save(path, format="llama.cpp")
    loaded = pgo.load(path)
    return path, loaded, pgo.text.GGUFTokenizer(loaded.file_keys)


def first_new_token_at(new: np.ndarray, k: int) -> int:
    """The first position from ``k`` whose token the answer has not had before."""
    return next(i for i in range(k, len(new)) if new[i] not in new[:i])


def test_generate_stops_at_the_files_end_of_generation_token(chat_model, chat_keys):
    path, model, tok = chat_model
    prompt = tok.apply_chat_template(HELLO, add_generation_prompt=True)
    full = model.generate(prompt, 12, temperature=0, ignore_eos=True)
    new = full[len(prompt):]
    assert len(new) == 12 and not set(new.tolist()) & tok.eog_ids  # random weights: no end of turn
    k = first_new_token_at(new, 3)
    model.file_keys = {**chat_keys, EOS: np.uint32(new[k])}  # as a file whose end-of-text token it is
    np.testing.assert_array_equal(model.generate(prompt, 12, temperature=0), full[:len(prompt) + k + 1])
    np.testing.assert_array_equal(model.generate(prompt, 12, temperature=0, ignore_eos=True), full)
    # a tokenizer's end-of-generation tokens take precedence over the file's
    np.testing.assert_array_equal(model.generate(prompt, 12, temperature=0, tokenizer=tok), full)
    with pytest.raises(TypeError, match="ignore_eos must be True or False"):
        model.generate(prompt, 2, ignore_eos="no")
    model.file_keys = dict(chat_keys)


def test_streamed_text_stops_at_the_end_of_the_turn(chat_model, chat_keys):
    path, model, tok = chat_model
    prompt = tok.apply_chat_template(HELLO, add_generation_prompt=True)
    new = model.generate(prompt, 12, temperature=0)[len(prompt):]
    k = first_new_token_at(new, 4)
    ends_there = pgo.text.GGUFTokenizer({**chat_keys, EOS: np.uint32(new[k])})
    pieces = list(model.generate(prompt, 12, temperature=0, tokenizer=ends_there, stream=True))
    assert "".join(pieces) == ends_there.decode(new[:k + 1])
    assert all(pieces) and not any("\ufffd" in p for p in pieces)  # whole characters only


def run_chat(path: Path, lines: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "chat.py"), str(path), "--temperature", "0",
                           "--threads", "1", *args], input=lines, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def answer(model, tok, messages: list[dict], max_tokens: int) -> str:
    ids = tok.apply_chat_template(messages, add_generation_prompt=True)
    return tok.decode(model.generate(ids, max_tokens, temperature=0, tokenizer=tok)[len(ids):])


def test_the_chat_script_keeps_the_conversation(chat_model, chat_keys, tmp_path):
    """Two turns through examples/chat.py (--system, --max-tokens): each answer is what the model
    writes for the whole conversation so far, rendered by the file's template, up to the end of the
    turn (here the file's end-of-text token, a token the model picks in the first answer)."""
    path, model, tok = chat_model
    system = [{"role": "system", "content": "You are terse."}]
    first = [*system, {"role": "user", "content": "Hello there"}]
    ids = tok.apply_chat_template(first, add_generation_prompt=True)
    new = model.generate(ids, 10, temperature=0)[len(ids):]
    k = first_new_token_at(new, 2)
    keys = {**chat_keys, EOS: np.uint32(new[k])}
    stopping = tmp_path / "stopping.gguf"
    model.file_keys = keys
    model.save(stopping, format="llama.cpp")
    model.file_keys = dict(chat_keys)
    loaded = pgo.load(stopping)
    tok = pgo.text.GGUFTokenizer(loaded.file_keys)
    one = answer(loaded, tok, first, 10)
    assert one == tok.decode(new[:k + 1])  # stopped at the end of the turn
    second = [*first, {"role": "assistant", "content": one}, {"role": "user", "content": "Tell me more, 世界"}]
    two = answer(loaded, tok, second, 10)
    out = run_chat(stopping, "Hello there\nTell me more, 世界\n\n", "--system", "You are terse.", "--max-tokens", "10")
    assert out == f"{one}\n{two}\n"


def test_the_chat_script_refuses_a_file_without_a_template(chat_model, chat_keys, tmp_path):
    path, model, tok = chat_model
    plain = tmp_path / "plain.gguf"
    model.file_keys = {k: v for k, v in chat_keys.items() if k != "tokenizer.chat_template"}
    model.save(plain, format="llama.cpp")
    model.file_keys = dict(chat_keys)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "chat.py"), str(plain)], input="hi\n",
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "has no chat template" in proc.stderr
