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

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_file
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
    the records' ``format``, and how many examples were ``truncated`` or ``skipped``. With a
    ``folder`` (``tokenize_jsonl``'s cache) the arrays are files mapped from it, and so are the windows
    made of them: data larger than memory trains (fit reads x and int32 targets in place)."""

    ids: np.ndarray
    trained: np.ndarray
    starts: np.ndarray
    format: str
    truncated: int = 0
    skipped: int = 0
    folder: Path | None = None

    def _array(self, name: str, shape: tuple[int, ...], fill: int) -> np.ndarray:
        """An int32 array of ``shape`` filled with ``fill``: in memory, or a file ``name``.npy of the folder."""
        if self.folder is None:
            return np.full(shape, fill, np.int32)
        out = np.lib.format.open_memmap(self.folder / f"{name}.npy", mode="w+", dtype=np.int32, shape=shape)
        out[...] = fill
        return out

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
        return int(self.trained.sum()) - int(self.trained[self.starts[:-1]].sum())

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
        x = self._array(f"windows-{steps}-x", (n, steps), pad_id)
        y = self._array(f"windows-{steps}-y", (n, steps), IGNORE_INDEX)
        for i in range(n):
            ids, trained = self.example(i)
            x[i, :len(ids) - 1] = ids[:-1]
            y[i, :len(ids) - 1] = np.where(trained[1:], ids[1:], IGNORE_INDEX)
        return x, y, (y != IGNORE_INDEX).sum(axis=1).astype(np.float64)


    def packed(self, length: int | None = None, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, y, weights) with several examples per row of ``length`` steps (default the longest
        example's length - 1), placed best-fit in order of decreasing length: x (n, 3, length) holds
        each row's ids (as ``windows``), their positions (restarting at 0 with each example) and each
        example's index within its row (padding a last index of its own), which a language model takes
        as packed windows (``Network.packed_steps``: no example attends to another, each at its own
        positions: every example trains as alone); y and weights as ``windows``."""
        sizes = self.lengths() - 1
        steps = int(sizes.max()) if length is None else int(length)
        if steps < 1 or int(sizes.max()) > steps:
            raise ValueError(f"packed windows of {steps} steps cannot hold an example of {int(sizes.max()) + 1} tokens")
        # best fit: each example, longest first, into the row with the least room that holds it; the rows
        # by their room (rooms[c]: the rows with c steps left), so a placement looks at `steps` counts
        rooms: list[list[int]] = [[] for _ in range(steps + 1)]
        counts = np.zeros(steps + 1, np.int64)
        place = np.empty(len(self), np.int64)
        n = 0
        for i in np.argsort(-sizes, kind="stable"):
            size = int(sizes[i])
            held = np.flatnonzero(counts[size:])
            if held.size:
                room = size + int(held[0])
                r = rooms[room].pop()
                counts[room] -= 1
            else:
                r, room, n = n, steps, n + 1
            rooms[room - size].append(r)
            counts[room - size] += 1
            place[i] = r
        x = self._array(f"packed-{steps}-x", (n, PACKED_ROWS, steps), 0)
        x[:, 0] = pad_id
        y = self._array(f"packed-{steps}-y", (n, steps), IGNORE_INDEX)
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
        for r in range(n):  # the padding's own index
            x[r, 2, fill[r]:] = count[r]
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


CACHE_VERSION = 1  # of the cached files' layout: a change makes every cache tokenize anew


def cache_folder(cache: str | os.PathLike[str], path: Path, tokenizer: GGUFTokenizer, options: dict[str, Any]) -> Path:
    """The folder of ``cache`` for the examples of the JSONL file ``path`` as ``tokenizer`` and
    ``options`` make them: named by the file and a digest of its size and time, the tokenizer's
    vocabulary and chat template, and the options, so that a change of any of them tokenizes anew."""
    stat = path.stat()
    digest = hashlib.sha256()
    digest.update(json.dumps([CACHE_VERSION, str(path.resolve()), stat.st_size, stat.st_mtime_ns, tokenizer.model,
                              tokenizer._chat_source, options]).encode())
    digest.update("\n".join(tokenizer.tokens).encode())
    digest.update(tokenizer.types.tobytes())
    return Path(cache) / f"{path.stem}-{digest.hexdigest()[:16]}"


class _Sink:
    """Where tokenized examples go: lists in memory, or (``folder``) files appended to, mapped when done."""

    def __init__(self, folder: Path | None) -> None:
        self.folder, self.lengths = folder, [0]
        self.ids: list[np.ndarray] = []
        self.trained: list[np.ndarray] = []
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / MANIFEST).unlink(missing_ok=True)  # incomplete until written last
            self.files = [open(folder / "ids.bin", "wb"), open(folder / "trained.bin", "wb")]

    def add(self, ids: np.ndarray, trained: np.ndarray) -> None:
        self.lengths.append(len(ids))
        if self.folder is None:
            self.ids.append(ids.astype(np.int32, copy=False))
            self.trained.append(trained)
        else:
            self.files[0].write(ids.astype(np.int32, copy=False).tobytes())
            self.files[1].write(trained.astype(np.bool_, copy=False).tobytes())

    def examples(self, kind: str, truncated: int, skipped: int) -> Examples:
        starts = np.cumsum(self.lengths, dtype=np.int64)
        if self.folder is None:
            return Examples(np.concatenate(self.ids), np.concatenate(self.trained), starts, kind, truncated, skipped)
        for f in self.files:
            f.close()
        np.save(self.folder / "starts.npy", starts)
        with atomic_file(self.folder / MANIFEST) as manifest:
            manifest.write(json.dumps({"format": kind, "truncated": truncated, "skipped": skipped}).encode())
        mapped = _mapped(self.folder)
        assert mapped is not None  # just written whole
        return mapped


MANIFEST = "examples.json"  # written last: a folder without it holds no complete tokenization


def _mapped(folder: Path) -> Examples | None:
    """The examples cached in ``folder``, mapped read-only; None where the folder holds none complete."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        starts = np.load(folder / "starts.npy")
    except (OSError, ValueError):
        return None
    ids = np.memmap(folder / "ids.bin", np.int32, "r")
    trained = np.memmap(folder / "trained.bin", np.bool_, "r")
    if len(ids) != starts[-1] or len(trained) != starts[-1]:
        return None
    return Examples(ids, trained, starts, manifest["format"], manifest["truncated"], manifest["skipped"], folder)


def tokenize_jsonl(path: str | os.PathLike[str], tokenizer: GGUFTokenizer, *, mask_prompt: bool = True,
                   max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, too_long: str = "truncate",
                   cache: str | os.PathLike[str] | None = None) -> Examples:
    """The examples of the JSONL file ``path`` (read as a stream), tokenized as the module says.

    mask_prompt: train on the completions / assistant turns only (default), else on every token.
    max_seq_length: the most tokens of an example; ``too_long`` "truncate" cuts a longer one there,
       "skip" leaves it out. An example with no trained token after its first is skipped.
    cache: a folder where the tokens go as files (``cache_folder``: one subfolder per file, tokenizer
       and options), mapped when done, and found there again by the next call with the same file,
       tokenizer and options instead of tokenizing anew; the examples' windows are made there too.
       Memory then holds no more than one example at a time (and 8 bytes per example): a file larger
       than memory trains. Without it, everything is in memory (about 5 bytes per token).
    ValueError naming the file and line for a record that is not as ``jsonl.py`` says or that the
    tokenizer cannot render, and for a file that leaves no example."""
    if not isinstance(max_seq_length, int) or isinstance(max_seq_length, bool) or max_seq_length < 2:
        raise ValueError(f"max_seq_length must be an int >= 2, got {max_seq_length!r}")
    if too_long not in TOO_LONG:
        raise ValueError(f"too_long must be one of {TOO_LONG}, got {too_long!r}")
    folder = None
    if cache is not None and Path(path).is_file():
        folder = cache_folder(cache, Path(path), tokenizer, {"mask_prompt": mask_prompt,
                                                             "max_seq_length": max_seq_length, "too_long": too_long})
        done = _mapped(folder)
        if done is not None:
            return done
    sink = _Sink(folder)
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
        sink.add(ids, trained)
    if len(sink.lengths) == 1:
        raise ValueError(f"{path}: no example to train on ({skipped} skipped)")
    return sink.examples(kind, truncated, skipped)
