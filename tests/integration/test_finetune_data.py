"""JSONL fine-tuning data (``data.jsonl``, ``data.finetune``) read with a real tokenizer and chat
template: Qwen2.5's vocabulary and template (llama.cpp's ``ggml-vocab-qwen2.gguf`` from the
llama-cpp-python 0.3.36 sdist). What each format trains is checked by decoding the trained tokens; bad
lines are refused naming the file and the line."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.data import split_files, tokenize_jsonl
from support import import_or_skip
from support.hf_models import vocab_keys

import_or_skip("jinja2", "chat templates render in Jinja2")
import_or_skip("tokenizers", "GGUFTokenizer runs its merges in Hugging Face tokenizers")

CHAT = {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2 + 2?"},
                     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3 + 3?"},
                     {"role": "assistant", "content": "6, as always."}]}


@pytest.fixture(scope="module")
def keys():
    return vocab_keys("qwen2")


@pytest.fixture(scope="module")
def tok(keys):
    return pgo.text.GGUFTokenizer(keys)


@pytest.fixture(scope="module")
def plain(keys):
    """The same vocabulary without a chat template."""
    return pgo.text.GGUFTokenizer({k: v for k, v in keys.items() if k != "tokenizer.chat_template"})


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def trained_text(tok, ex, i):
    ids, trained = ex.example(i)
    return tok.decode(ids[trained], special=True)


def test_a_conversation_trains_the_assistants_turns(tok, tmp_path):
    ex = tokenize_jsonl(write(tmp_path / "chat.jsonl", [CHAT]), tok)
    ids, trained = ex.example(0)
    np.testing.assert_array_equal(ids, tok.apply_chat_template(CHAT["messages"]))
    assert trained_text(tok, ex, 0) == "4<|im_end|>\n6, as always.<|im_end|>\n"
    assert ex.format == "chat" and (ex.truncated, ex.skipped) == (0, 0)
    everything = tokenize_jsonl(tmp_path / "chat.jsonl", tok, mask_prompt=False)
    assert everything.trained.all() and everything.n_targets == len(ids) - 1


def test_a_completion_is_an_exchange_in_the_template_or_the_texts_joined(tok, plain, tmp_path):
    path = write(tmp_path / "c.jsonl", [{"prompt": "Q: why?", "completion": "A: because."}])
    ex = tokenize_jsonl(path, tok)
    exchange = [{"role": "user", "content": "Q: why?"}, {"role": "assistant", "content": "A: because."}]
    np.testing.assert_array_equal(ex.example(0)[0], tok.apply_chat_template(exchange))
    assert trained_text(tok, ex, 0) == "A: because.<|im_end|>\n"
    ex = tokenize_jsonl(path, plain)   # no template: the prompt, the completion, the end of text
    ids, trained = ex.example(0)
    assert plain.decode(ids, special=True) == "Q: why?A: because.<|endoftext|>"
    assert plain.decode(ids[trained], special=True) == "A: because.<|endoftext|>"
    np.testing.assert_array_equal(ids[:len(plain.encode("Q: why?"))], plain.encode("Q: why?"))


def test_texts_train_every_token_and_end_with_the_end_of_text(plain, tmp_path):
    texts = ["The first fortune.", "A second, longer fortune about nothing much."]
    ex = tokenize_jsonl(write(tmp_path / "t.jsonl", [{"text": t} for t in texts]), plain)
    for i, t in enumerate(texts):
        ids, trained = ex.example(i)
        np.testing.assert_array_equal(ids, np.r_[plain.encode(t), plain.eos_id])
        assert trained.all()


def test_long_examples_are_cut_or_skipped_and_counted(tok, tmp_path):
    short = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    path = write(tmp_path / "long.jsonl", [CHAT, short, CHAT])
    n = len(tok.apply_chat_template(CHAT["messages"]))
    n_short = len(tok.apply_chat_template(short["messages"]))
    assert n_short < 40 < n
    cut = tokenize_jsonl(path, tok, max_seq_length=40)
    assert (len(cut), cut.truncated, cut.skipped) == (3, 2, 0) and cut.lengths().max() == 40
    skipped = tokenize_jsonl(path, tok, max_seq_length=40, too_long="skip")
    assert (len(skipped), skipped.truncated, skipped.skipped) == (1, 0, 2)
    # cut before its first assistant token, a conversation has nothing left to learn: skipped
    first = int(np.flatnonzero(tok.apply_chat_template(CHAT["messages"], return_assistant_mask=True)[1])[0])
    assert first < n_short
    cut_early = tokenize_jsonl(path, tok, max_seq_length=first)
    assert (len(cut_early), cut_early.truncated, cut_early.skipped) == (1, 1, 2)


def test_a_data_directory_gives_its_splits(tmp_path):
    for split in ("train", "valid"):
        write(tmp_path / f"{split}.jsonl", [{"text": split}])
    assert split_files(tmp_path) == {"train": tmp_path / "train.jsonl", "valid": tmp_path / "valid.jsonl"}
    assert split_files(tmp_path / "train.jsonl") == {"train": tmp_path / "train.jsonl"}
    (tmp_path / "train.jsonl").unlink()
    with pytest.raises(ValueError, match="has no train.jsonl"):
        split_files(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        split_files(tmp_path / "missing")


@pytest.mark.parametrize("lines, match", [
    (['{"text": "a"}', "{not json"], r"bad.jsonl:2: not JSON"),
    (['["a list"]'], r"bad.jsonl:1: expected a JSON object, got list"),
    (['{"prompt": "only a prompt"}'], r"bad.jsonl:1: a record needs the field 'text', 'prompt' and 'completion'"),
    (['{"text": "a"}', "", '{"prompt": "p", "completion": "c"}'], r"bad.jsonl:3: a completions record in a file of text"),
    (['{"text": 3}'], r"bad.jsonl:1: 'text' must be a string, got int"),
    (['{"messages": []}'], r"bad.jsonl:1: an empty conversation"),
    (['{"messages": [{"role": "wizard", "content": "x"}]}'], r"bad.jsonl:1: message 0 has the role 'wizard'"),
    (['{"messages": [{"role": "user"}]}'], r"bad.jsonl:1: message 0 has no 'content'"),
    (['{"messages": [{"role": "user", "content": "x"}]}'], r"bad.jsonl:1: the conversation has no assistant message"),
    (['{"messages": "hello"}'], r"bad.jsonl:1: 'messages' must be a list"),
])
def test_bad_lines_are_refused_naming_the_file_and_line(tok, tmp_path, lines, match):
    with pytest.raises(ValueError, match=match):
        tokenize_jsonl(write(tmp_path / "bad.jsonl", lines), tok)


def test_bad_files_and_arguments(tok, plain, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        tokenize_jsonl(tmp_path / "missing.jsonl", tok)
    (tmp_path / "latin1.jsonl").write_bytes(b'{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"latin1.jsonl:1: not UTF-8"):
        tokenize_jsonl(tmp_path / "latin1.jsonl", tok)
    with pytest.raises(ValueError, match=r"chat.jsonl:1: a conversation needs a chat template"):
        tokenize_jsonl(write(tmp_path / "chat.jsonl", [CHAT]), plain)
    with pytest.raises(ValueError, match="no example to train on"):
        tokenize_jsonl(write(tmp_path / "blank.jsonl", ["", "  "]), tok)
    with pytest.raises(ValueError, match="max_seq_length must be an int >= 2"):
        tokenize_jsonl(tmp_path / "chat.jsonl", tok, max_seq_length=1)
    with pytest.raises(ValueError, match="too_long must be one of"):
        tokenize_jsonl(tmp_path / "chat.jsonl", tok, too_long="drop")


def test_a_cache_holds_the_tokens_as_files_found_again_and_windows_mapped_there(tok, tmp_path, monkeypatch):
    records = [CHAT, {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}] * 3
    path = write(tmp_path / "chat.jsonl", records)
    memory = tokenize_jsonl(path, tok)
    cached = tokenize_jsonl(path, tok, cache=tmp_path / "cache")
    assert cached.folder is not None and cached.folder.parent == tmp_path / "cache"
    assert isinstance(cached.ids, np.memmap) and isinstance(cached.trained, np.memmap)
    for name in ("ids", "trained", "starts"):
        np.testing.assert_array_equal(getattr(cached, name), getattr(memory, name))
    for layout in ("windows", "packed"):
        made, kept = getattr(memory, layout)(), getattr(cached, layout)()
        assert isinstance(kept[0], np.memmap) and isinstance(kept[1], np.memmap)   # files of the folder
        for a, b in zip(made, kept):
            np.testing.assert_array_equal(a, b)
    # found again: the next call reads the files and tokenizes nothing
    monkeypatch.setattr(type(tok), "apply_chat_template", lambda *a, **k: pytest.fail("tokenized again"))
    again = tokenize_jsonl(path, tok, cache=tmp_path / "cache")
    assert again.folder == cached.folder
    np.testing.assert_array_equal(again.ids, memory.ids)
    monkeypatch.undo()
    # other options, another folder; a folder without its manifest (an interrupted run) is made anew
    other = tokenize_jsonl(path, tok, cache=tmp_path / "cache", mask_prompt=False)
    assert other.folder != cached.folder and other.trained.all()
    (cached.folder / "examples.json").unlink()
    anew = tokenize_jsonl(path, tok, cache=tmp_path / "cache")
    np.testing.assert_array_equal(anew.trained, memory.trained)
