"""Fine-tuning data: the JSONL records of ``jsonl.py`` tokenized with a model's tokenizer into examples
whose trained tokens are marked, and the windows ``fit`` trains on.

    tokenizer = GGUFTokenizer.from_file("base.gguf")
    train = tokenize_jsonl("data/train.jsonl", tokenizer)          # mask_prompt=True: answers only
    x, y, weights = train.windows()
    model.fit(x, y, sample_weight=weights, batch_size=4)

What each format trains (the tokens whose ``trained`` flag is set are the targets, the others only
inputs): a text, every token; a prompt and completion, the completion (rendered as a user / assistant
exchange by the file's chat template where it has one, as MLX-LM does; else the two texts joined, the
end-of-text token after the completion); a conversation (rendered by the chat template), the
assistant's turns (``GGUFTokenizer.apply_chat_template``'s assistant mask). ``mask_prompt=False``
trains every token. An example longer than ``max_seq_length`` tokens is cut to it or skipped
(``too_long``); one left with nothing to learn is skipped; ``Examples`` counts both.

``Examples.windows`` gives one example per row, padded after its end: the padding's targets are
``IGNORE_INDEX`` (no loss, no gradient), and causal attention keeps an example's tokens from seeing the
padding after them, so each row trains exactly as its example alone would. The weights (each row's
count of trained tokens) make every optimizer step the mean over its tokens, as Hugging Face's Trainer
and MLX-LM weigh a batch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..nn import PACKED_ROWS
from ..nn.losses import IGNORE_INDEX
from ..text import GGUFTokenizer
from .jsonl import read_records

TOO_LONG = ("truncate", "skip")
DEFAULT_MAX_SEQ_LENGTH = 2048  # MLX-LM's


@dataclass(frozen=True)
class Examples:
    """Tokenized examples: ``ids`` (int32) and ``trained`` (bool, whether the model learns to write the
    token) of every example one after another, ``starts`` (n + 1,) where each begins and the end;
    the records' ``format``, and how many examples were ``truncated`` or ``skipped``."""

    ids: np.ndarray
    trained: np.ndarray
    starts: np.ndarray
    format: str
    truncated: int = 0
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.starts) - 1

    def lengths(self) -> np.ndarray:
        """The number of tokens of each example."""
        return np.diff(self.starts)

    def example(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, trained) of example ``i``."""
        a, b = self.starts[i], self.starts[i + 1]
        return self.ids[a:b], self.trained[a:b]

    @property
    def n_targets(self) -> int:
        """The trained tokens that are targets (an example's first token never is: nothing precedes it)."""
        return int(sum(self.trained[a + 1:b].sum() for a, b in zip(self.starts[:-1], self.starts[1:])))

    def windows(self, length: int | None = None, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, y, weights): one example per row of ``length`` steps (default the longest example's
        length - 1), x its ids but the last, y the next ids where trained and ``IGNORE_INDEX`` elsewhere,
        both padded after the example's end (x with ``pad_id``, y with ``IGNORE_INDEX``); ``weights``
        each row's number of targets, for ``fit(sample_weight=)``. int32, float64; ValueError for an
        example longer than ``length`` + 1 tokens."""
        sizes = self.lengths()
        steps = int(sizes.max()) - 1 if length is None else int(length)
        if steps < 1:
            raise ValueError(f"windows need a length of at least 1 step, got {steps}")
        if int(sizes.max()) > steps + 1:
            raise ValueError(f"an example has {int(sizes.max())} tokens, more than windows of {steps} steps hold "
                             f"({steps} + 1 tokens): tokenize with max_seq_length={steps + 1}")
        n = len(self)
        x = np.full((n, steps), pad_id, np.int32)
        y = np.full((n, steps), IGNORE_INDEX, np.int32)
        for i in range(n):
            ids, trained = self.example(i)
            x[i, :len(ids) - 1] = ids[:-1]
            y[i, :len(ids) - 1] = np.where(trained[1:], ids[1:], IGNORE_INDEX)
        return x, y, (y != IGNORE_INDEX).sum(axis=1).astype(np.float64)


    def packed(self, length: int | None = None, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, y, weights) with several examples per row of ``length`` steps (default the longest
        example's length - 1), placed first-fit in order of decreasing length: x (n, 3, length) holds
        each row's ids (as ``windows``), their positions (restarting at 0 with each example) and each
        example's index within its row (padding a last index of its own), which a language model takes
        as packed windows (``Network.packed_steps``: no example attends to another, each at its own
        positions: every example trains as alone); y and weights as ``windows``."""
        sizes = self.lengths() - 1
        steps = int(sizes.max()) if length is None else int(length)
        if steps < 1 or int(sizes.max()) > steps:
            raise ValueError(f"packed windows of {steps} steps cannot hold an example of {int(sizes.max()) + 1} tokens")
        free = np.empty(0, np.int64)   # the steps each row has left
        place = np.empty(len(self), np.int64)
        for i in np.argsort(-sizes, kind="stable"):
            fits = np.flatnonzero(free >= sizes[i])
            r = int(fits[0]) if fits.size else len(free)
            if r == len(free):
                free = np.r_[free, steps]
            free[r] -= sizes[i]
            place[i] = r
        n = len(free)
        x = np.zeros((n, PACKED_ROWS, steps), np.int32)
        x[:, 0] = pad_id
        y = np.full((n, steps), IGNORE_INDEX, np.int32)
        fill = np.zeros(n, np.int64)
        count = np.zeros(n, np.int32)
        for i in range(len(self)):   # in the examples' order within each row
            r, at, size = place[i], fill[place[i]], sizes[i]
            ids, trained = self.example(i)
            x[r, 0, at:at + size] = ids[:-1]
            x[r, 1, at:at + size] = np.arange(size)
            x[r, 2, at:at + size] = count[r]
            y[r, at:at + size] = np.where(trained[1:], ids[1:], IGNORE_INDEX)
            fill[r] += size
            count[r] += 1
        x[:, 2] = np.where(np.arange(steps) >= fill[:, None], count[:, None], x[:, 2])  # the padding's own index
        return x, y, (y != IGNORE_INDEX).sum(axis=1).astype(np.float64)


def tokenize_record(kind: str, record: dict[str, Any], tokenizer: GGUFTokenizer, mask_prompt: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, trained) of one checked record of format ``kind`` (the module says what each trains);
    ValueError where the tokenizer cannot render it (no chat template, a template that refuses it)."""
    template = tokenizer.chat_template
    if kind == "completions" and template is not None:
        kind, record = "chat", {"messages": [{"role": "user", "content": record["prompt"]},
                                             {"role": "assistant", "content": record["completion"]}]}
    if kind == "text":
        ids = _with_eos(tokenizer.encode(record["text"]), tokenizer)
        return ids, np.ones(len(ids), bool)
    if kind == "completions":
        prompt = tokenizer.encode(record["prompt"])
        completion = _with_eos(tokenizer.encode(record["completion"], add_special=False), tokenizer)
        trained = np.r_[np.full(len(prompt), not mask_prompt), np.ones(len(completion), bool)]
        return np.r_[prompt, completion].astype(np.int32), trained
    if template is None:
        raise ValueError("a conversation needs a chat template, and this tokenizer has none "
                         "(tokenizer.chat_template)")
    if not any(m["role"] == "assistant" for m in record["messages"]):
        raise ValueError("the conversation has no assistant message to learn from")
    ids, mask = tokenizer.apply_chat_template(record["messages"], return_assistant_mask=True,
                                              tools=record.get("tools"))
    return ids, mask.astype(bool) if mask_prompt else np.ones(len(ids), bool)


def _with_eos(ids: np.ndarray, tokenizer: GGUFTokenizer) -> np.ndarray:
    """``ids`` ending with the end-of-text token (where the vocabulary has one): a document or an
    answer the model learns to end."""
    eos = tokenizer.eos_id
    if eos is None or (len(ids) and ids[-1] == eos):
        return ids
    return np.r_[ids, eos].astype(np.int32)


def tokenize_jsonl(path: str | os.PathLike[str], tokenizer: GGUFTokenizer, *, mask_prompt: bool = True,
                   max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, too_long: str = "truncate") -> Examples:
    """The examples of the JSONL file ``path`` (read as a stream), tokenized as the module says.

    mask_prompt: train on the completions / assistant turns only (default), else on every token.
    max_seq_length: the most tokens of an example; ``too_long`` "truncate" cuts a longer one there,
       "skip" leaves it out. An example with no trained token after its first is skipped.
    ValueError naming the file and line for a record that is not as ``jsonl.py`` says or that the
    tokenizer cannot render, and for a file that leaves no example."""
    if not isinstance(max_seq_length, int) or isinstance(max_seq_length, bool) or max_seq_length < 2:
        raise ValueError(f"max_seq_length must be an int >= 2, got {max_seq_length!r}")
    if too_long not in TOO_LONG:
        raise ValueError(f"too_long must be one of {TOO_LONG}, got {too_long!r}")
    all_ids: list[np.ndarray] = []
    all_trained: list[np.ndarray] = []
    kind, truncated, skipped = "", 0, 0
    for line, kind, record in read_records(path):
        try:
            ids, trained = tokenize_record(kind, record, tokenizer, mask_prompt)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{line}: {exc}") from None
        cut = len(ids) > max_seq_length
        if cut and too_long == "truncate":
            ids, trained = ids[:max_seq_length], trained[:max_seq_length]
        if (cut and too_long == "skip") or not trained[1:].any():
            skipped += 1
            continue
        truncated += cut
        all_ids.append(ids.astype(np.int32, copy=False))
        all_trained.append(trained)
    if not all_ids:
        raise ValueError(f"{path}: no example to train on ({skipped} skipped)")
    starts = np.zeros(len(all_ids) + 1, np.int64)
    np.cumsum([len(a) for a in all_ids], out=starts[1:])
    return Examples(np.concatenate(all_ids), np.concatenate(all_trained), starts, kind, truncated, skipped)
