"""``FitPlan``: what ``fit`` resolves from its arguments once (the loss, the metrics, the sample weights,
the training and validation samples, the batching), before anything is allocated. The training
session and the fit loop take it as it is."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from ..nn import Network
from ..nn.losses import Loss
from .arguments import (check_validation_data, clamp_batch_sizes, sample_weights, targets)
from .metrics import Metric, Metrics, counted_by_ggml_opt, get_metrics

# Validation samples, their targets (None for the losses without labels) and weights (None: all alike).
Validation = tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]


@dataclass(frozen=True)
class Batching:
    """How fit walks the training samples: ``epochs``, samples per optimizer step (``batch_size``) and
    per evaluation (``physical``), runs of ``run`` consecutive samples shuffled (0: in order) from
    ``seed``, how a batch gets into the graph (``gather``), and at most ``max_steps`` optimizer steps
    per epoch (None: all)."""

    epochs: int
    batch_size: int
    physical: int
    run: int
    seed: int | None
    gather: str = "auto"
    max_steps: int | None = None

    def steps_per_epoch(self, n_train: int) -> int:
        """Physical batches per epoch: every sample once, the last optimizer step filled up."""
        n_phys = -(-n_train // self.batch_size) * (self.batch_size // self.physical)
        if self.max_steps is not None:
            n_phys = min(n_phys, self.max_steps * (self.batch_size // self.physical))
        return n_phys


@dataclass(frozen=True)
class FitPlan:
    """One fit, resolved: the training samples ``x`` (a language model's may be shorter than its
    context: the training graph is built for their length) and their ``targets`` (None for a loss without
    targets), per-sample ``weights`` (None: all alike), ``validation`` data, the ``loss``, the bound
    ``metrics`` and the ``batching``.

    ``own_loss_graph``: fit ends the training graph with its own loss graph (``loss_graph.py``: the
    loss's ``per_sample`` graph times a weight column under ggml-opt's SUM loss) instead of ggml-opt's
    loss type: for sample weights, for losses ggml-opt lacks, for sequence outputs, and for metrics
    that need the outputs of the training steps."""

    x: np.ndarray
    targets: np.ndarray | None
    weights: np.ndarray | None
    validation: Validation | None
    loss: Loss
    metrics: list[Metric]
    own_loss_graph: bool
    batching: Batching

    @property
    def label_width(self) -> int:
        """The width of the training graph's label rows: the targets', and (own loss graph) one more
        column, each sample's weight (``loss_graph.py``)."""
        width = self.targets.shape[1] if self.targets is not None else 0
        return width + 1 if self.own_loss_graph else width


def plan_fit(model: Network, x: np.ndarray, y: ArrayLike | None, loss: Loss, metrics: Metrics,
             weighting: tuple[ArrayLike | None, dict | None], batching: Batching,
             validation: tuple[float, object]) -> FitPlan:
    """Resolve fit's arguments for ``model`` (built) on checked samples ``x``: ``weighting`` is
    (sample_weight, class_weight), ``validation`` (validation_split, validation_data). Every check
    raises here, before anything is allocated; ``batching``'s sizes are clamped to the training samples."""
    n = x.shape[0]
    output_shape = model.output_shape_for(tuple(x.shape[1:]))
    t = targets(model, y, x, loss)
    loss.check(output_shape, None if t is None else t.shape[1])
    bound = get_metrics(metrics, loss, output_shape, None if t is None else t.shape[1:])
    sample_weight, class_weight = weighting
    weights = sample_weights(sample_weight, class_weight, t, n, loss)
    if len(output_shape) == 2 and class_weight is not None:
        raise ValueError("class_weight is for models with one class per sample, not sequence outputs")
    if loss.batch_means and weights is not None:
        raise ValueError("sample_weight needs a loss function that returns per-sample losses (n,) or (n, 1); "
                         "this one returns a scalar")
    own_graph = (weights is not None or loss.opt_loss is None or len(output_shape) == 2
                 or not counted_by_ggml_opt(bound))
    validation_split, validation_data = validation
    n_train = n - int(n * validation_split)
    if n_train < 1:
        raise ValueError(f"validation_split={validation_split} leaves no training samples out of {n}")
    batch_size, physical = clamp_batch_sizes(batching.batch_size, batching.physical, n_train)
    held_out: Validation | None = None
    if n_train < n:
        held_out = (x[n_train:], t[n_train:] if t is not None else None,
                    weights[n_train:] if weights is not None else None)
    elif validation_data is not None:
        held_out = check_validation_data(model, validation_data, loss)
        if held_out[0].shape[1:] != x.shape[1:]:
            raise ValueError(f"validation_data[0] has samples of shape {held_out[0].shape[1:]}, x of {x.shape[1:]}")
        if held_out[1] is not None and t is not None and held_out[1].shape[1] != t.shape[1]:
            raise ValueError(f"validation_data[1] has label rows of width {held_out[1].shape[1]}, y of {t.shape[1]}")
    return FitPlan(x[:n_train], t[:n_train] if t is not None else None,
                   weights[:n_train] if weights is not None else None, held_out, loss, bound, own_graph,
                   Batching(batching.epochs, batch_size, physical, batching.run, batching.seed, batching.gather,
                            batching.max_steps))
