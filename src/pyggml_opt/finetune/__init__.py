"""Fine-tune a GGUF language model on JSONL data in one call (``finetune``), or one command
(``python -m pyggml_opt.finetune``, ``__main__.py``): the steps a user would take with the API.

1. Load the base as it is (``pgo.load``: its weights memory-mapped, in their ggml types; the file is
   only ever read) and its tokenizer and chat template (``text.GGUFTokenizer``).
2. Read the data (``data.split_files``, ``data.tokenize_jsonl``): a JSONL file or MLX-LM's directory of
   ``train.jsonl`` / ``valid.jsonl`` / ``test.jsonl``; the prompts masked unless asked otherwise; in
   memory, or (``cache``) as files tokenized once and mapped.
3. Lay the examples out for ``fit`` (``Examples.windows`` or, with ``pack``, ``Examples.packed``), all
   at the length of the longest example (at most ``max_seq_length`` tokens and the model's context).
4. Give the model LoRA adapters (``enable_lora``; the base frozen), or train every weight (``full``:
   F16 / BF16 ones as float32 master copies; quantized bases are refused).
5. ``fit`` with AdamW, each step the mean over its batch's trained tokens, the validation loss the
   mean over the validation tokens after every epoch; a checkpoint after every epoch
   (``ModelCheckpoint``: the weights and the optimizer state, written atomically), which ``resume``
   continues exactly.
6. Write the result: the adapter as llama.cpp's LoRA GGUF (``save_adapter``: ``llama-cli -m base.gguf
   --lora adapter.gguf``), or the whole model (``full``) as a GGUF llama.cpp runs; with ``fuse``, also
   base + adapter merged into one such file.
Every argument and the data are checked before anything trains (ValueError naming the problem).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..checks import check_int, check_number
from ..data import Examples, split_files, tokenize_jsonl
from ..data.finetune import TOO_LONG
from ..models import Model
from ..models.lm import LanguageModel
from ..saving import load
from ..text import GGUFTokenizer
from ..training import AdamW, Callback, History, ModelCheckpoint
from ..training.progress import Progress

Log = Callable[[str], None]
# the types full fine-tuning trains as float32 copies (exact: every F16 / BF16 value is a float32 one);
# a quantized weight's float32 values would be a different model, 4-8x its size
HALF_TYPES = ("f16", "bf16")


@dataclass
class FineTuneResult:
    """What ``finetune`` leaves: the trained ``model`` (with its adapters), its ``tokenizer``, the
    tokenized ``data`` by split, the ``history`` of ``fit``, the validation loss (mean over its tokens)
    ``before`` and ``after`` training (None without validation data), and the files written."""

    model: Model
    tokenizer: GGUFTokenizer
    data: dict[str, Examples]
    history: History
    before: float | None
    after: float | None
    files: list[Path] = field(default_factory=list)


def _path(name: str, value: str | os.PathLike[str] | None) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, got {type(value).__name__}")
    return Path(value)


def check_outputs(base: Path, outputs: dict[str, Path | None]) -> None:
    """ValueError for an output that is the base itself (the base is never written) or whose folder does
    not exist, and for two outputs that are one file."""
    seen: dict[Path, str] = {}
    for name, path in outputs.items():
        if path is None:
            continue
        if path.exists() and base.exists() and path.resolve() == base.resolve():
            raise ValueError(f"{name} {str(path)!r} is the base model: the base is never written")
        if not path.parent.is_dir():
            raise ValueError(f"{name} {str(path)!r}: the folder {str(path.parent)!r} does not exist")
        if path.resolve() in seen:
            raise ValueError(f"{name} and {seen[path.resolve()]} are the same file {str(path)!r}")
        seen[path.resolve()] = name


def load_base(base: Path) -> tuple[LanguageModel, GGUFTokenizer]:
    """The language model of the GGUF file ``base`` and its tokenizer; ValueError for a file that is
    not one."""
    if not base.is_file():
        raise ValueError(f"base model {str(base)!r} does not exist")
    model = load(base)
    if not isinstance(model, LanguageModel):
        raise ValueError(f"{str(base)!r} holds a {type(model).__name__}, not a language model")
    if not any(k.startswith("tokenizer.ggml.") for k in model.file_keys):
        raise ValueError(f"{str(base)!r} has no tokenizer (tokenizer.ggml.* keys): fine-tuning reads the "
                         "data with the model's own tokenizer")
    return model, GGUFTokenizer(model.file_keys)


def token_loss(model: Model, x: np.ndarray, y: np.ndarray, weights: np.ndarray, batch_size: int) -> float:
    """The mean loss over the trained tokens of windows ``x``, ``y`` (``weights``: their counts)."""
    return float(model.evaluate(x, y, sample_weight=weights, batch_size=batch_size, metrics=[])[0])


class TokenProgress(Progress):
    """fit's progress bar with the tokens trained per second (``tokens`` per epoch)."""

    def __init__(self, verbose: int, tokens: int) -> None:
        super().__init__(verbose)
        self.tokens = tokens

    def throughput(self, done: float, seconds: float) -> str:
        return f"{self.tokens * done / max(seconds, 1e-9):,.0f} tokens/s"


def finetune(base: str | os.PathLike[str], data: str | os.PathLike[str], *,
             valid: str | os.PathLike[str] | None = None, output: str | os.PathLike[str] | None = "adapter.gguf",
             lora_rank: int = 8, lora_alpha: float = 16.0, lora_dropout: float = 0.0,
             targets: str | Sequence[str] = "all-linear", full: bool = False, epochs: int = 1, batch_size: int = 4,
             learning_rate: float = 1e-4, mask_prompt: bool = True, max_seq_length: int = 2048,
             too_long: str = "truncate", pack: bool = False, fuse: str | os.PathLike[str] | None = None,
             checkpoint: str | os.PathLike[str] | None = None, resume: str | os.PathLike[str] | None = None,
             cache: str | os.PathLike[str] | None = None, seed: int = 0, n_threads: int | None = None,
             verbose: int = 1, log: Log = print, callbacks: Sequence[Callback] = ()) -> FineTuneResult:
    """Fine-tune the GGUF language model ``base`` on the JSONL data ``data`` (a file, or a directory of
    train.jsonl / valid.jsonl / test.jsonl) and write the adapter to ``output`` (see the module).

    valid: a JSONL file of validation data (default the directory's valid.jsonl, if any).
    lora_rank, lora_alpha, lora_dropout, targets: the adapters (``enable_lora``: scale alpha / rank,
       targets llama.cpp's or PEFT's names or "all-linear"). full: train every weight instead, F16 / BF16
       ones as float32 master copies (a quantized base is refused, naming its weights); ``output`` then
       receives the whole model, float32, as a GGUF llama.cpp runs.
    epochs, batch_size (rows per optimizer step), learning_rate (AdamW, no weight decay), seed.
    mask_prompt: train on the completions / assistant turns only (default), else on every token.
    max_seq_length, too_long ("truncate" or "skip"): the longest example, in tokens (at most the
       model's context + 1). pack: several examples per row (``Examples.packed``: no example attends
       to another; faster when examples are short, see docs/guide/language-models.md).
    output: None writes no file (the returned model has the adapters).
    fuse: also write base + adapter merged, as one GGUF llama.cpp runs (the returned model is then the
       merged one: ``merge_lora`` in place).
    checkpoint: a file (``{epoch}`` allowed) written after every epoch, weights and optimizer state;
       resume: such a file to continue from, exactly (same data and arguments).
    cache: a folder for the tokenized data and its windows as files (``tokenize_jsonl``'s ``cache``):
       tokenized once, found there by later runs, and trained from the files' mappings (data larger
       than memory); default in memory.
    log: where the summary lines go (default print); verbose: fit's (0 silent, 1 bar, 2 a line per epoch).
    """
    base_path = _path("base", base)
    assert base_path is not None  # a required argument
    out, fuse_path, ckpt, resume_path = (_path(n, v) for n, v in
                                         (("output", output), ("fuse", fuse), ("checkpoint", checkpoint),
                                          ("resume", resume)))
    check_outputs(base_path, {"output": out, "fuse": fuse_path, "checkpoint": ckpt})
    if resume_path is not None and not resume_path.is_file():
        raise ValueError(f"resume: the checkpoint {str(resume_path)!r} does not exist")
    for name, value in (("lora_rank", lora_rank), ("epochs", epochs), ("batch_size", batch_size)):
        check_int(name, value, 0 if name == "epochs" else 1)
    check_number("learning_rate", learning_rate, 0.0, 1.0, lo_open=True)
    check_int("max_seq_length", max_seq_length, 2)
    if too_long not in TOO_LONG:
        raise ValueError(f"too_long must be one of {TOO_LONG}, got {too_long!r}")
    files = split_files(data)
    if valid is not None:
        valid_path = _path("valid", valid)
        assert valid_path is not None  # given
        if not valid_path.is_file():
            raise ValueError(f"validation data {str(valid_path)!r} does not exist")
        files["valid"] = valid_path

    model, tokenizer = load_base(base_path)
    assert model.input_shape is not None  # loaded models are built
    context = model.input_shape[0]
    longest = min(max_seq_length, context + 1)
    sets = {split: tokenize_jsonl(path, tokenizer, mask_prompt=mask_prompt, max_seq_length=longest,
                                  too_long=too_long, cache=cache) for split, path in files.items() if split != "test"}
    for split, ex in sets.items():
        log(f"{split}: {len(ex)} examples ({ex.format}), {ex.n_targets} tokens trained of "
            f"{int(ex.lengths().sum())}; {ex.truncated} truncated, {ex.skipped} skipped (max_seq_length {longest})")
    steps = max(int(ex.lengths().max()) for ex in sets.values()) - 1
    pad = tokenizer.eos_id if tokenizer.eos_id is not None else 0
    windows = {split: (ex.packed(steps, pad) if pack else ex.windows(steps, pad)) for split, ex in sets.items()}

    if full:
        kept = model.quantized()
        quantized = {k: t for k, t in kept.items() if t not in HALF_TYPES}
        if quantized:
            names = ", ".join(f"{k} ({t})" for k, t in list(quantized.items())[:4])
            raise ValueError(f"full fine-tuning trains float32 weights (F16 / BF16 ones as float32 copies), and "
                             f"{str(base_path)!r} holds {len(quantized)} quantized ({names}"
                             f"{', ...' if len(quantized) > 4 else ''}): train LoRA adapters on it, or start from an "
                             "F32 / F16 file")
        if kept:
            weights = model.get_weights()
            model.set_weights({k: weights[k].dequantize() for k in kept})  # type: ignore[union-attr]
            log(f"full fine-tuning: {len(kept)} F16 / BF16 weights trained as float32 master copies")
        model.unfreeze()
    else:
        model.enable_lora(rank=lora_rank, alpha=lora_alpha, targets=targets, dropout=lora_dropout, seed=seed)

    x, y, w = windows["train"]
    validation = windows.get("valid")
    physical = min(batch_size, len(x))
    before = token_loss(model, *validation, physical) if validation is not None else None
    if before is not None:
        log(f"validation loss before: {before:.4f}")
    cbs: list[Callback] = [TokenProgress(verbose, int(w.sum())), *callbacks]
    if ckpt is not None:
        cbs.append(ModelCheckpoint(ckpt, monitor="loss"))
    history = model.fit(x, y, sample_weight=w, validation_data=validation, epochs=epochs, batch_size=batch_size,
                        optimizer=AdamW(lr=learning_rate, weight_decay=0.0), seed=seed, n_threads=n_threads,
                        verbose=0, callbacks=cbs, resume_from=resume_path, metrics=[])
    after = token_loss(model, *validation, physical) if validation is not None else None
    result = FineTuneResult(model, tokenizer, sets, history, before, after)
    if after is not None:
        log(f"validation loss after: {after:.4f}")
    if out is not None:
        if full:
            model.save(out, format="llama.cpp")
        else:
            model.save_adapter(out)
        result.files.append(out)
        log(f"wrote {'the model' if full else 'the adapter'} to {out}")
    if fuse_path is not None and not full:
        model.merge_lora()  # in place, last: a copy would hold the base twice
        model.save(fuse_path, format="llama.cpp")
        result.files.append(fuse_path)
        log(f"wrote base + adapter merged to {fuse_path}")
    return result
