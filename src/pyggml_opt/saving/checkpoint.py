"""Training checkpoints: weights plus the optimizer state, so that training resumes exactly.

A checkpoint is a model GGUF file (``model_file.py``, loadable with ``pgo.load``) with, in addition:
  - ``pyggml_opt.checkpoint.epoch``: epochs completed;
  - ``pyggml_opt.checkpoint.optimizer``: "adamw" or "sgd"; ``.iter``: ggml-opt's optimizer iteration
    (1 + steps taken; AdamW's bias correction); ``.step``: steps taken (the learning-rate schedule's clock);
  - tensors ``optimizer.m.<param>`` and ``optimizer.v.<param>``: the AdamW moments.
ggml-opt keeps that state private; vendor/patches/0002 adds the accessors used here.

``fit(..., resume_from=path)`` restores all of it (``training.session.TrainingSession.write_state``),
and replays the shuffling of the epochs already done, so that stopping after epoch k and resuming
gives the weights of an uninterrupted run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import GGUFFile
from ..nn import Network
from .model_file import read_weights, save

PREFIX = "pyggml_opt.checkpoint."


@dataclass
class OptimizerState:
    """What ggml-opt and the Optimizer object hold between steps."""

    optimizer: str
    iter: int
    step: int
    m: dict[str, np.ndarray] = field(default_factory=dict)
    v: dict[str, np.ndarray] = field(default_factory=dict)


def save_checkpoint(model: Network, path, epoch: int, state: OptimizerState) -> None:
    """Write model + optimizer state after ``epoch`` completed epochs."""
    extra = {PREFIX + "epoch": int(epoch), PREFIX + "optimizer": state.optimizer,
             PREFIX + "iter": int(state.iter), PREFIX + "step": int(state.step)}
    tensors = {f"optimizer.m.{k}": v for k, v in state.m.items()}
    tensors.update({f"optimizer.v.{k}": v for k, v in state.v.items()})
    save(model, path, extra, tensors)


def load_checkpoint(path, model: Network) -> tuple[dict[str, np.ndarray], int, OptimizerState]:
    """(weights, epochs completed, optimizer state) from a checkpoint written for ``model``."""
    with GGUFFile.read(path) as f:
        epoch = f.get(PREFIX + "epoch")
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"{path!s} is not a training checkpoint (no {PREFIX}epoch); it was saved "
                             "without optimizer state")
        name, it, step = f.get(PREFIX + "optimizer"), f.get(PREFIX + "iter"), f.get(PREFIX + "step")
        if not isinstance(name, str) or not isinstance(it, int) or not isinstance(step, int):
            raise ValueError(f"{path!s}: corrupt checkpoint metadata")
        weights = read_weights(f, model)
        state = OptimizerState(name, it, step)
        names = set(f.tensor_names())
        for pname, shape in model.param_shapes.items():
            for kind, dest in (("m", state.m), ("v", state.v)):
                key = f"optimizer.{kind}.{pname}"
                if key in names:
                    value = f.tensor(key, len(shape))
                    if value.shape != shape or value.dtype != np.float32 or not np.isfinite(value).all():
                        raise ValueError(f"{path!s}: optimizer tensor {key!r} does not fit parameter shape {shape}")
                    dest[pname] = value
        return weights, epoch, state
