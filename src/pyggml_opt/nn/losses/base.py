"""``Loss``, the base of every loss, ``FunctionLoss`` (a loss function of the user's) and the registry
of losses by name. The named losses are in ``named.py``; the package's docstring says what a loss owns."""
from __future__ import annotations

from typing import Callable, Union

import numpy as np

from ..._lib import lib
from ...core import GRAPH_SIZE, Context, OptLoss
from .. import ops
from ..ops import Tensor
from .numeric import finite_float32, softmax, token_targets

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
        """``y`` (a numeric array of ``n`` rows) as float32 target rows for outputs of ``output_shape``
        (token ids of sequence outputs: int32 ones as given); ValueError naming ``name`` for targets this
        loss cannot take."""
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


