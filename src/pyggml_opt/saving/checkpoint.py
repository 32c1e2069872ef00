"""Training checkpoints: weights plus the optimizer state, so that training resumes exactly.

A checkpoint is a model GGUF file (``model_file.py``, loadable with ``pgo.load``) with, in addition:
  - ``pyggml_opt.checkpoint.epoch``: epochs completed;
  - ``pyggml_opt.checkpoint.optimizer``: "adamw" or "sgd"; ``.iter``: ggml-opt's optimizer iteration
    (1 + steps taken: AdamW's bias correction and the learning-rate schedule's clock); ``.step``: steps
    taken, iter - 1 (written for readers that keep a clock of their own, as pyggml_opt 0.1's first
    releases did; reading takes ``.iter``);
  - ``pyggml_opt.checkpoint.history``: the metrics of the epochs completed (JSON: ``epoch``, a list,
    and ``history``, metric name -> one value per epoch);
  - tensors ``optimizer.m.<param>`` and ``optimizer.v.<param>``: the AdamW moments.
ggml-opt keeps that state private; vendor/patches/0002 adds the accessors used here.

``fit(..., resume_from=path)`` restores all of it (``core.OptContext.write_state``),
and replays the shuffling of the epochs already done, so that stopping after epoch k and resuming
gives the weights of an uninterrupted run.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

# OptimizerState is core's (the state of an OptContext); pickles of pyggml_opt 0.1's first releases name
# it as this module's, and find it here
from ..core import GGUFFile, OptimizerState
from ..core.tensor_data import Weight
from ..nn import Network
from ..nn.lora import lora_settings
from ..nn.params import check_param_name
from .model_file import check_architecture, read_weights, save, stored_name

PREFIX = "pyggml_opt.checkpoint."
_MOMENT_PREFIX = "optimizer.m."  # and "optimizer.v.": as long


@dataclass
class Checkpoint:
    """What ``load_checkpoint`` reads back."""

    weights: dict[str, Weight]
    epoch: int                        # epochs completed
    state: OptimizerState
    history: dict                     # {"epoch": [...], "history": {metric: [...]}}; empty if not saved
    loss: str = ""                    # the model file's loss entry (nn.losses.Loss.entry)


def save_checkpoint(model: Network, path: str | os.PathLike[str], epoch: int, state: OptimizerState,
                    history: dict | None = None) -> None:
    """Write model + optimizer state (+ the metrics so far) after ``epoch`` completed epochs."""
    for name in state.m:
        check_param_name(name, reserve=len(_MOMENT_PREFIX))
    extra = {PREFIX + "epoch": int(epoch), PREFIX + "optimizer": state.optimizer,
             PREFIX + "iter": int(state.iter), PREFIX + "step": int(state.step),
             PREFIX + "history": json.dumps(history or {})}
    tensors = {f"optimizer.m.{k}": v for k, v in state.m.items()}
    tensors.update({f"optimizer.v.{k}": v for k, v in state.v.items()})
    # the file's own layout, but for a model with LoRA adapters, which only pyggml_opt's holds whole
    save(model, path, extra, tensors, format="pyggml_opt" if lora_settings(model) else None)


def load_checkpoint(path: str | os.PathLike[str], model: Network) -> Checkpoint:
    """The checkpoint at ``path``, written for ``model``'s architecture (ValueError for another one, whose
    weights could fit this model's tensors and yet mean something else)."""
    with GGUFFile.read(path) as f:
        epoch = f.get(PREFIX + "epoch")
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"{path!s} is not a training checkpoint (no {PREFIX}epoch); it was saved "
                             "without optimizer state")
        name, it = f.get(PREFIX + "optimizer"), f.get(PREFIX + "iter")
        if not isinstance(name, str) or not isinstance(it, int):
            raise ValueError(f"{path!s}: corrupt checkpoint metadata")
        check_architecture(f, model, f"checkpoint {os.fspath(path)!r}")
        weights = read_weights(f, model)
        state = OptimizerState(name, it)
        names = set(f.tensor_names())
        legacy = model.legacy_names()
        for pname, shape in model.param_shapes.items():
            for kind, dest in (("m", state.m), ("v", state.v)):
                key = stored_name(pname, names, legacy, f"optimizer.{kind}.")
                if key in names:
                    value = f.tensor(key, len(shape))
                    if value.shape != shape or value.dtype != np.float32 or not np.isfinite(value).all():
                        raise ValueError(f"{path!s}: optimizer tensor {key!r} does not fit parameter shape {shape}")
                    dest[pname] = value
        try:
            history = json.loads(f.get(PREFIX + "history") or "{}")
        except ValueError:
            raise ValueError(f"{path!s}: corrupt checkpoint history") from None
        if not isinstance(history, dict):
            raise ValueError(f"{path!s}: corrupt checkpoint history")
        loss = f.get("pyggml_opt.loss")
        return Checkpoint(weights, epoch, state, history, loss if isinstance(loss, str) else "")
