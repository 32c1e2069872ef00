"""Losses: one ``Loss`` object per loss, registered by name (as layers and metrics are).

A loss owns everything that depends on which loss it is: ggml-opt's loss type when ggml-opt computes it
(``opt_loss``), its graph (``per_sample``: each sample's loss, for fit's own loss graph), its float64
numpy twin (``host``: validation and ``evaluate``), its target checks and conversion (``targets``), what
metrics may ask of its targets (``n_classes``, ``binary``, ``compares_values``), the transform
``predict`` applies (``logits`` / ``probabilities``) and its model-file entry (``entry``). A loss of
your own is a ``Loss`` subclass (a graph from ``pyggml_opt.ops``, optionally its numpy twin) registered
with ``register_loss``, or a loss function ``fn(outputs, labels) -> Tensor`` (``FunctionLoss``).

Each per-sample loss is the mean over the outputs of the element-wise loss (PyTorch's
``reduction="mean"`` over a batch of such rows), except cross-entropy, summed over the classes:
  - mae: |o - y|;  huber (delta 1, PyTorch's HuberLoss): d^2 / 2 for |d| < 1, else |d| - 1/2;
  - binary_cross_entropy: on logits, log(1 + exp(o)) - y o (PyTorch's BCEWithLogitsLoss), y in [0, 1].
Sequence outputs (n, T, V) with token ids (n, T) take cross-entropy per token, averaged over the tokens
of a sample (all samples have T tokens: the mean over every token, PyTorch's cross_entropy); ids equal
to ``IGNORE_INDEX`` (-100) are no target, left out of that mean (prompt tokens, padding). "mean" and
"sum" take no targets: the model's output is the loss.

A loss function ``fn(outputs, labels) -> Tensor`` is built from ``pyggml_opt.ops`` on the outputs and
the float label rows (n, k) of ``y``, and returns per-sample losses (n,) or (n, 1), or a scalar: the
mean over the batch, which cannot be weighted per sample. Model files name it (``custom:<name>``) but
cannot hold it.
"""
from .base import (FUNCTION_ENTRY, FunctionLoss, Loss, LossFn, LossSpec, find_loss, function_entry_name, get_loss,
                   loss_entry, losses_where, register_loss)
from .named import (DEFAULT, BinaryCrossEntropy, CrossEntropy, Huber, Mean, MeanAbsoluteError, MeanSquaredError,
                    Sum)
from .numeric import IGNORE_INDEX, softmax

__all__ = ["BinaryCrossEntropy", "CrossEntropy", "DEFAULT", "FUNCTION_ENTRY", "FunctionLoss", "Huber", "IGNORE_INDEX",
           "Loss", "LossFn", "LossSpec", "Mean", "MeanAbsoluteError", "MeanSquaredError", "Sum", "find_loss",
           "function_entry_name", "get_loss", "loss_entry", "losses_where", "register_loss", "softmax"]
