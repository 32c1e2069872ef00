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
of a sample (all samples have T tokens: the mean over every token, PyTorch's cross_entropy). "mean" and
"sum" take no targets: the model's output is the loss.

A loss function ``fn(outputs, labels) -> Tensor`` is built from ``pyggml_opt.ops`` on the outputs and
the float label rows (n, k) of ``y``, and returns per-sample losses (n,) or (n, 1), or a scalar: the
mean over the batch, which cannot be weighted per sample. Model files name it (``custom:<name>``) but
cannot hold it.
"""
from __future__ import annotations

from typing import Callable, Union

import numpy as np

from .._lib import lib
from ..core import GRAPH_SIZE, Context, OptLoss
from . import ops
from .ops import Tensor

HUBER_DELTA = 1.0
# A model file's loss entry for a loss that is code (a function, an unregistered Loss): this, then its name.
FUNCTION_ENTRY = "custom:"

LossFn = Callable[[Tensor, Tensor], Tensor]


class Loss:
    """A loss of ``fit`` / ``evaluate``: subclass it and implement ``per_sample`` (and, for evaluation in
    numpy rather than in a forward graph, ``host``); ``register_loss`` makes it known by ``name``."""

    name = "loss"
    opt_loss: OptLoss | None = None  # ggml-opt's own loss type for it (fit then needs no loss graph of its own)
    has_targets = True               # False: the model's output is the loss ("mean", "sum")
    weighted = True                  # takes sample_weight (fit's own loss graph weighs each sample)
    classes = False                  # targets are classes: class ids / one-hot rows, or token ids of sequences
    binary = False                   # targets are 0 / 1 labels per output, on logits
    logits = False                   # predict applies ``probabilities`` by default
    sequences = False                # takes sequence outputs (T, V) with token ids (n, T)

    # ---- targets ------------------------------------------------------------------------------------
    def targets(self, arr: np.ndarray, n: int, output_shape: tuple[int, ...], name: str) -> np.ndarray | None:
        """``y`` (a numeric array of ``n`` rows) as float32 target rows for outputs of ``output_shape``;
        ValueError naming ``name`` for targets this loss cannot take."""
        if not self.has_targets:
            return None
        if len(output_shape) == 2:
            if not self.sequences:
                raise ValueError(f"a model with sequence outputs {output_shape} trains with loss="
                                 f"{losses_where('sequences')} on token ids, got {self.label!r}")
            return token_targets(arr, output_shape, name)
        n_out = output_shape[0]
        if arr.ndim == 1 and n_out == 1:
            arr = arr.reshape(n, 1)
        if arr.shape != (n, n_out):
            hint = " (or class ids of shape (n,))" if self.classes else ""
            raise ValueError(f"{name} must have shape ({n}, {n_out}) for a model with {n_out} outputs{hint}, "
                             f"got {arr.shape}")
        rows = finite_float32(arr, name)
        self.check_rows(rows, name)
        return rows

    def check_rows(self, rows: np.ndarray, name: str) -> None:
        """ValueError for float32 target rows (n, n_out) outside what the loss takes."""

    def check(self, output_shape: tuple[int, ...], target_width: int | None) -> None:
        """ValueError / TypeError before anything is trained, for outputs and target rows this loss
        cannot take (a loss function is tried on a graph)."""

    # ---- graph and numpy ---------------------------------------------------------------------------
    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        """The loss of each sample (n, 1) of ``outputs`` against target rows ``y``; ``constants``: the
        tensors of ``graph_constants``."""
        raise NotImplementedError(f"{type(self).__name__} must implement per_sample(outputs, y, constants)")

    def graph_constants(self, output_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Constant tensors the graph of ``per_sample`` reads, by name."""
        return {}

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray | None:
        """The per-sample losses (n,) in float64 numpy, or None: evaluated in the forward graph instead."""
        return None

    @property
    def in_graph(self) -> bool:
        """Whether validation and ``evaluate`` compute this loss in the forward graph (it has no ``host``)."""
        return type(self).host is Loss.host

    def reported(self, mean: float, unc: float, count: int) -> tuple[float, float]:
        """What fit's logs and evaluate report of the mean per-sample loss (and its uncertainty)."""
        return mean, unc

    @property
    def batch_means(self) -> bool:
        """Whether ``per_sample`` gives the batch's mean (a scalar) rather than one loss per sample."""
        return False

    # ---- what metrics and predict ask --------------------------------------------------------------
    def n_classes(self, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> int | None:
        """The classes of the targets, for metrics comparing the largest outputs with the target class; None: none."""
        return output_shape[-1] if self.classes else None

    def compares_values(self, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> bool:
        """Whether the targets are values of the outputs' shape (regression metrics apply): targets that
        are neither classes nor binary labels, of the outputs' shape."""
        return self.has_targets and not (self.classes or self.binary) and target_shape == output_shape

    def probabilities(self, outputs: np.ndarray) -> np.ndarray:
        """``predict``'s probabilities of raw outputs (``logits=False``): softmax unless the loss says otherwise."""
        return softmax(outputs)

    # ---- names -------------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """How messages name the loss."""
        return self.name

    @property
    def entry(self) -> str:
        """The model file's entry (``pyggml_opt.loss``): the registered name, or ``custom:`` and the name."""
        return self.name if _REGISTRY.get(self.name) is type(self) else FUNCTION_ENTRY + self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class CrossEntropy(Loss):
    """Softmax cross-entropy of logits against class ids, one-hot or probability rows, or token ids."""

    name = "cross_entropy"
    opt_loss = OptLoss.CROSS_ENTROPY
    classes = True
    logits = True
    sequences = True

    def targets(self, arr: np.ndarray, n: int, output_shape: tuple[int, ...], name: str) -> np.ndarray | None:
        if len(output_shape) == 1 and arr.ndim == 1:
            return class_rows(arr, n, output_shape[0], name)
        return super().targets(arr, n, output_shape, name)

    def check_rows(self, rows: np.ndarray, name: str) -> None:
        if (rows < 0).any() or not np.allclose(rows.sum(axis=1), 1.0, atol=1e-3):
            raise ValueError(f"{name}: {self.name} targets must be one-hot or probability rows (>= 0, summing to 1)")

    def graph_constants(self, output_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        # sequence outputs (T, V): token ids become one-hot rows in the graph, through this table
        return {"one_hot": np.eye(output_shape[1], dtype=np.float32)} if len(output_shape) == 2 else {}

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        if outputs.ndim == 3:   # token ids (n, T): the mean over a sample's tokens
            n, steps, vocab = outputs.shape
            targets = ops.reshape(ops.embedding(ops.to_int32(y), constants["one_hot"]), n * steps, vocab)
            per_token = self.per_sample(ops.reshape(outputs, n * steps, vocab), targets, constants)
            return ops.mean(ops.reshape(per_token, n, steps))
        return ops.neg(ops.sum_rows(ops.mul(y, ops.log_softmax(outputs))))

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        assert targets is not None  # has targets
        o = outputs.astype(np.float64)
        if o.ndim == 3:
            ids = targets.astype(np.int64)[..., None]
            return -np.take_along_axis(log_softmax(o), ids, axis=-1)[..., 0].mean(axis=1)
        return -(targets.astype(np.float64) * log_softmax(o)).sum(axis=1)


class BinaryCrossEntropy(Loss):
    """Sigmoid cross-entropy of logits against labels in [0, 1] per output (PyTorch's BCEWithLogitsLoss)."""

    name = "binary_cross_entropy"
    binary = True
    logits = True

    def check_rows(self, rows: np.ndarray, name: str) -> None:
        if (rows < 0).any() or (rows > 1).any():
            raise ValueError(f"{name}: {self.name} targets must be in [0, 1] (labels 0 / 1 or probabilities)")

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        return ops.mean(ops.sub(ops.softplus(outputs), ops.mul(y, outputs)))

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        assert targets is not None  # has targets
        o, y = outputs.astype(np.float64), targets.astype(np.float64)
        return (np.logaddexp(0.0, o) - y * o).mean(axis=1)

    def probabilities(self, outputs: np.ndarray) -> np.ndarray:
        return sigmoid(outputs)


class _ElementWise(Loss):
    """A per-sample mean over the outputs of an element-wise error of ``d = |o - y|``."""

    def error(self, diff: Tensor) -> Tensor:
        raise NotImplementedError

    def host_error(self, d: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        return ops.mean(self.error(ops.abs(ops.sub(outputs, y))))

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        assert targets is not None  # has targets
        return self.host_error(np.abs(outputs.astype(np.float64) - targets.astype(np.float64))).mean(axis=1)


class MeanSquaredError(_ElementWise):
    name = "mse"
    opt_loss = OptLoss.MEAN_SQUARED_ERROR

    def error(self, diff: Tensor) -> Tensor:
        return ops.sqr(diff)

    def host_error(self, d: np.ndarray) -> np.ndarray:
        return d ** 2


class MeanAbsoluteError(_ElementWise):
    name = "mae"

    def error(self, diff: Tensor) -> Tensor:
        return diff

    def host_error(self, d: np.ndarray) -> np.ndarray:
        return d


class Huber(_ElementWise):
    name = "huber"

    def error(self, diff: Tensor) -> Tensor:
        # 0.5 min(|d|, delta)^2 + delta relu(|d| - delta): both pieces of the Huber loss, from ops ggml
        # can differentiate (no select)
        over = ops.relu(ops.scale(diff, 1.0, -HUBER_DELTA))
        inside = ops.sub(diff, over)
        return ops.add(ops.scale(ops.sqr(inside), 0.5), ops.scale(over, HUBER_DELTA))

    def host_error(self, d: np.ndarray) -> np.ndarray:
        return np.where(d < HUBER_DELTA, 0.5 * d ** 2, HUBER_DELTA * (d - 0.5 * HUBER_DELTA))


class Mean(Loss):
    """The model's outputs are the loss: their mean per sample (no targets)."""

    name = "mean"
    opt_loss = OptLoss.MEAN
    has_targets = False
    weighted = False

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        return outputs.astype(np.float64).mean(axis=1)


class Sum(Mean):
    """The model's outputs are the loss: their sum per sample and over the samples (no targets)."""

    name = "sum"
    opt_loss = OptLoss.SUM

    def host(self, outputs: np.ndarray, targets: np.ndarray | None) -> np.ndarray:
        return outputs.astype(np.float64).sum(axis=1)

    def reported(self, mean: float, unc: float, count: int) -> tuple[float, float]:
        return mean * count, unc * count


class FunctionLoss(Loss):
    """A loss function ``fn(outputs, labels) -> Tensor`` of the user's, on float label rows of any width."""

    def __init__(self, fn: LossFn) -> None:
        self.fn = fn
        self.name = str(getattr(fn, "__qualname__", type(fn).__name__))
        self._batch_means = False

    @property
    def label(self) -> str:
        return "a loss function"

    @property
    def batch_means(self) -> bool:
        return self._batch_means

    def targets(self, arr: np.ndarray, n: int, output_shape: tuple[int, ...], name: str) -> np.ndarray | None:
        rows = arr.reshape(n, 1) if arr.ndim == 1 else arr
        if rows.ndim != 2 or rows.shape[1] == 0:
            raise ValueError(f"{name} must hold float label rows (n, k) for a loss function, got shape {arr.shape}")
        return finite_float32(rows, name)

    def check(self, output_shape: tuple[int, ...], target_width: int | None) -> None:
        """Try the function on a graph of two samples (no data) with label rows ``target_width`` wide,
        and note whether it returns the batch's mean (a scalar) rather than per-sample losses."""
        assert target_width is not None  # a loss function takes label rows
        ctx = Context(GRAPH_SIZE)
        try:
            outputs = ops.new_input(ctx, (2, *output_shape), "outputs")
            value = self.per_sample(outputs, ops.new_input(ctx, (2, target_width), "labels"), {})
            self._batch_means = value.ndim == 1
        finally:
            ctx.close()

    def per_sample(self, outputs: Tensor, y: Tensor, constants: dict[str, Tensor]) -> Tensor:
        """``fn(outputs, y)`` checked: per-sample losses (n, 1), or the batch's loss as a scalar (1,).
        ValueError / TypeError naming the function when it raises or returns anything else (a batch of
        one sample counts as per-sample: its mean is its loss)."""
        n = outputs.shape[0]
        what = f"the loss function {self.name}(outputs {outputs.shape}, labels {y.shape})"
        try:
            value = self.fn(outputs, y)
        except Exception as e:  # noqa: BLE001 - whatever the user's function raises, reported as its failure
            raise ValueError(f"{what} raised {type(e).__name__}: {e}") from e
        if not isinstance(value, Tensor):
            raise TypeError(f"{what} must return a Tensor built with pyggml_opt.ops, got {type(value).__name__}")
        shape = value.shape
        if value.ptr.type != lib.GGML_TYPE_F32:
            raise ValueError(f"{what} must return float32 losses")
        if shape in ((n,), (n, 1)):
            return ops.reshape(value, n, 1)
        if int(np.prod(shape)) == 1:
            return ops.reshape(value, 1)
        raise ValueError(f"{what} must return per-sample losses of shape ({n},) or ({n}, 1), or a scalar (the "
                         f"batch's mean), got shape {shape}")

    def n_classes(self, output_shape: tuple[int, ...], target_shape: tuple[int, ...]) -> int | None:
        # a loss function on rows of class scores against class rows
        return output_shape[0] if len(output_shape) == 1 and target_shape == output_shape else None

    @property
    def entry(self) -> str:
        return FUNCTION_ENTRY + self.name

    def __repr__(self) -> str:
        return f"FunctionLoss({self.name})"


_REGISTRY: dict[str, type[Loss]] = {}
DEFAULT = CrossEntropy.name  # fit's and evaluate's loss unless told


def register_loss(cls: type[Loss]) -> type[Loss]:
    """Make ``cls`` known by its ``name`` (fit's ``loss=``, model files); usable as a class decorator."""
    if not (isinstance(cls, type) and issubclass(cls, Loss)) or cls is FunctionLoss:
        raise TypeError(f"register_loss takes a Loss subclass, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name or cls.name.startswith(FUNCTION_ENTRY):
        raise ValueError(f"a loss needs a name (not starting with {FUNCTION_ENTRY!r}), got {cls.name!r}")
    if _REGISTRY.get(cls.name, cls) is not cls:
        raise ValueError(f"a loss {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


for _cls in (CrossEntropy, BinaryCrossEntropy, MeanSquaredError, MeanAbsoluteError, Huber, Mean, Sum):
    register_loss(_cls)

LossSpec = Union[str, Loss, LossFn]  # fit's ``loss``: a name, a Loss object, or a loss function


def get_loss(spec: object) -> Loss:
    """The Loss for fit's ``loss``: a registered name, a ``Loss`` object, or a loss function. ValueError for
    an unknown name, and for a model file's entry of a loss function (code the file cannot hold)."""
    if isinstance(spec, Loss):
        return spec
    if isinstance(spec, str):
        if spec in _REGISTRY:
            return _REGISTRY[spec]()
        if spec.startswith(FUNCTION_ENTRY):
            raise ValueError(f"this model was trained with the loss function {spec[len(FUNCTION_ENTRY):]!r}, which a "
                             "model file cannot hold: pass it again as loss=")
    elif callable(spec):
        return FunctionLoss(spec)
    raise ValueError(f"unknown loss {spec!r}; expected one of {sorted(_REGISTRY)}, a Loss or a loss function "
                     "fn(outputs, labels) -> Tensor")


def find_loss(spec: object) -> Loss | None:
    """The Loss of a model's ``loss`` attribute, or None where it names none that can be used here."""
    try:
        return None if spec is None else get_loss(spec)
    except ValueError:
        return None


def loss_entry(spec: object) -> str:
    """A model file's entry for a model's ``loss``: "" for none, an entry read from a file as it was."""
    if spec is None or isinstance(spec, str):
        return spec or ""
    return get_loss(spec).entry


def function_entry_name(entry: str) -> str | None:
    """The function's name in a model file's entry of a loss that is code, else None."""
    return entry[len(FUNCTION_ENTRY):] if entry.startswith(FUNCTION_ENTRY) else None


def losses_where(flag: str) -> str:
    """The registered losses whose class attribute ``flag`` is true, as messages list them: 'a' or 'b'."""
    return " or ".join(repr(name) for name, cls in sorted(_REGISTRY.items()) if getattr(cls, flag))


# ---- target conversion --------------------------------------------------------------------------------
def finite_float32(arr: np.ndarray, name: str) -> np.ndarray:
    """Targets as float32, refusing NaN and inf (also where float32 overflows)."""
    out = arr.astype(np.float32, copy=False)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or inf")
    return out


def class_rows(arr: np.ndarray, n: int, n_out: int, name: str) -> np.ndarray:
    """Class ids (n,) in [0, n_out) as one-hot float32 rows."""
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ValueError(f"{name}: class ids must be integers")
    ids = arr.astype(np.int64)
    if ids.min() < 0 or ids.max() >= n_out:
        raise ValueError(f"{name}: class ids must be in [0, {n_out}) for a model with {n_out} outputs, "
                         f"got range [{ids.min()}, {ids.max()}]")
    onehot = np.zeros((n, n_out), np.float32)
    onehot[np.arange(n), ids] = 1.0
    return onehot


def token_targets(arr: np.ndarray, output_shape: tuple[int, ...], name: str) -> np.ndarray:
    """Token ids (n, T) for a model whose outputs are (T, V) logits per sample."""
    steps, vocab = output_shape
    if arr.shape[1:] != (steps,):
        raise ValueError(f"{name} must hold token ids of shape (n, {steps}) for outputs of shape {output_shape}, "
                         f"got {arr.shape}")
    if arr.dtype.kind == "f" and (not np.isfinite(arr).all() or (arr != np.round(arr)).any()):
        raise ValueError(f"{name}: token ids must be integers")
    if arr.size and (arr.min() < 0 or arr.max() >= vocab):
        raise ValueError(f"{name}: token ids must be in [0, {vocab}), got range [{arr.min()}, {arr.max()}]")
    return arr.astype(np.float32)


# ---- numpy transforms ---------------------------------------------------------------------------------
def log_softmax(z: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, stable for any magnitude."""
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)), the probabilities of binary logits, without overflow."""
    return np.exp(-np.logaddexp(0.0, -z)).astype(z.dtype, copy=False)


def softmax(z: np.ndarray) -> np.ndarray:
    """softmax over the last axis (the probabilities of logits)."""
    return np.exp(log_softmax(z))
