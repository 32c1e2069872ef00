"""``Network``: the base of every model as a graph: shapes, parameters and their memory.

A network is built for an input shape (batch axis excluded): its parameters get names, shapes and
initial values drawn from ``seed``. Weights live in numpy until the network is first run, then in a
backend buffer (``ParamStore``); ``get_weights`` / ``set_weights`` move them as dicts of arrays. A
parameter may be kept in a ggml quantized type (a ``core.tensor_data.Quantized`` value: a model read
from a file of F16, Q8_0, Q4_K ... weights): it is frozen (no gradient, no optimizer step) and never
dequantized.
``close()`` frees that buffer, and so does dropping the network. Copies (``copy.copy``,
``copy.deepcopy``, ``clone``, pickle: ``restoring.Copyable``) are independent: same architecture,
weights and loss, no native state shared; a subclass adds what its copies keep (``_copied_state``:
training's, in ``training.trainable``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from ..checks import check_int
from ..core import Backend
from ..core.tensor_data import Weight
from .losses import LossSpec
from .layers.base import SequenceState
from .ops import Tensor
from .params import (ParamStore, check_param_name, check_quantizable, checked_weight, matching_params,
                     quantized_types)
# restore / restore_network: the functions pickles of networks name (as pyggml_opt.nn.network's)
from .restoring import CONFIG_HINT, Copyable, check_rebuilds, restore, restore_network  # noqa: F401
from .shapes import MAX_SAMPLE_AXES
from .summary import SummaryRow, summary_lines
from .use_lock import UseLock

_N = TypeVar("_N", bound="Network")

# the rows of a packed window (``Network.packed_steps``): the ids, their positions, their document index
PACKED_ROWS = 3


@dataclass(frozen=True)
class NetworkShapes:
    """What a network has for one input shape (``Network._build_shapes``; batch axis excluded): the
    ``output`` shape, every tensor it keeps (``tensors``: parameters and buffers, in the network's
    order), which of them are ``buffers`` (state, not trained: BatchNorm's running statistics), and
    the per-sample shapes of its ``step_inputs`` (filled anew every training step: dropout masks)."""

    output: tuple[int, ...]
    tensors: dict[str, tuple[int, ...]]
    buffers: frozenset[str] = frozenset()
    step_inputs: dict[str, tuple[int, ...]] = field(default_factory=dict)


class Network(Copyable):
    """Base class of models. Subclasses implement ``_build_shapes`` (pure: the shapes for an input
    shape), ``_init_param``, ``forward``, ``get_config`` / ``from_config`` (the architecture, for
    saving and copying). What ``build`` fixed is the network's state: ``input_shape``,
    ``output_shape``, ``param_shapes``, ``buffer_names()``, ``step_inputs()``."""

    def __init__(self) -> None:
        self.input_shape: tuple[int, ...] | None = None
        self.output_shape: tuple[int, ...] | None = None
        # every tensor the network keeps: its parameters and its buffers (``buffer_names``)
        self.param_shapes: dict[str, tuple[int, ...]] = {}
        self._buffers: frozenset[str] = frozenset()
        self._step_inputs: dict[str, tuple[int, ...]] = {}
        # the loss the outputs are for (``nn.losses``: a name, a Loss, a loss function, or a model file's
        # entry): what predict turns them into, what evaluate computes by default, what files record
        self.loss: LossSpec | None = None
        self.backend: str | None = None  # the ggml device the network last ran on (kept by close and copies)
        self._weights: dict[str, Weight] | None = None
        self._quantized: dict[str, str] = {}  # parameters kept quantized: name -> ggml type name
        self._frozen: frozenset[str] = frozenset()  # float32 parameters kept out of training (``freeze``)
        self._store: ParamStore | None = None
        self.file_keys: dict[str, object] = {}  # the keys of a file it was read from that save writes back
        # Held by each call that uses the network's native state (fit, predict, evaluate, generate, close)
        self.lock = UseLock()

    # ---- to implement -----------------------------------------------------------------------------
    def _build_shapes(self, input_shape: tuple[int, ...]) -> NetworkShapes:
        """The shapes of the network for ``input_shape``; ValueError if it does not fit. Pure: the
        network changes only when ``build`` keeps them."""
        raise NotImplementedError

    def _init_param(self, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        """The graph of the model for input ``x`` (shape (batch, *input_shape)); ``state``: a decoding
        graph's positions and key / value caches (``nn/decoding.py``), for networks whose layers decode."""
        raise NotImplementedError

    def get_config(self) -> dict:
        """The architecture: what ``from_config`` needs to make an unbuilt network like this one."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, config: dict) -> "Network":
        raise NotImplementedError

    def _summary_rows(self) -> list[SummaryRow]:
        """The rows of ``summary()``, one per layer (or group of parameters)."""
        raise NotImplementedError

    @property
    def input_dtype(self) -> str:
        """What the model takes: "float32" values, or "int32" ids (a model that starts with Embedding)."""
        return "float32"

    def check_input(self, x: np.ndarray) -> None:
        """ValueError for input values the model cannot take (token ids out of range)."""

    def packed_steps(self, sample_shape: tuple[int, ...]) -> int | None:
        """The steps T of packed windows of ``sample_shape`` (``PACKED_ROWS``, T), int32 rows of ids, their
        positions and their document index: several documents in one sequence, each at its own positions
        and attending to itself only (a language model's fine-tuning data); None where the network takes
        no such samples (the default)."""
        return None

    def step_inputs(self, sample_shape: tuple[int, ...] | None = None) -> dict[str, tuple[int, ...]]:
        """Inputs (name -> per-sample shape) that every training step fills anew, such as dropout masks,
        for samples of ``sample_shape`` (default the input shape: a language model also trains on
        shorter sequences); the training graph passes them to ``forward`` among the parameters, other
        graphs do not."""
        if sample_shape is None or tuple(sample_shape) == self.input_shape:
            return dict(self._step_inputs)
        self.output_shape_for(tuple(sample_shape))  # ValueError where the parameters do not fit
        return dict(self._build_shapes(tuple(sample_shape)).step_inputs)

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Values of step input ``name`` for one training step (``shape``: batch first)."""
        raise KeyError(name)

    def quantized(self) -> dict[str, str]:
        """The parameters kept in a ggml type other than F32, name -> type ("f16", "q8_0", "q4_K" ...):
        frozen (ggml-opt gives them no gradient and no optimizer step; fit trains around them on the CPU),
        computed with as they are stored (ggml's MUL_MAT and GET_ROWS take quantized weights)."""
        return dict(self._quantized)

    def frozen(self) -> frozenset[str]:
        """The parameters no training step changes (no gradient, optimizer step or weight decay): those
        ``freeze`` named and those kept quantized."""
        return self._frozen | self._quantized.keys()

    def freeze(self, *names: str) -> None:
        """Keep parameters out of training, as Keras's ``layer.trainable = False``: each name a parameter
        ("head.weight") or a layer's prefix ("tok", "blk0.attn"); no names: every parameter. Copies,
        pickles, saved files and checkpoints keep it; ``unfreeze`` undoes it."""
        self._set_frozen(self._frozen | self._trainable_named(names))

    def unfreeze(self, *names: str) -> None:
        """Train frozen float32 parameters again (names as ``freeze`` takes them; none: all). Parameters
        kept quantized stay frozen: give them float32 values with ``set_weights`` to train them."""
        self._set_frozen(self._frozen - self._trainable_named(names))

    def _trainable_named(self, names: tuple[str, ...]) -> frozenset[str]:
        self.require_built()
        return matching_params(names, [n for n in self.param_shapes if n not in self._buffers]) - self._quantized.keys()

    def _set_frozen(self, frozen: frozenset[str]) -> None:
        with self.lock:
            if frozen != self._frozen:
                # ggml flags parameters when their tensors are made: the store is made anew at the next use
                self.check_not_busy("freeze or unfreeze parameters of")
                self._drop_store()
                self._frozen = frozen

    def quantizable(self) -> frozenset[str]:
        """The parameters that may be kept quantized: those the layers use only as matrices ggml multiplies
        or picks rows from in its quantized types (``Layer.quantizable``); none unless a subclass says."""
        return frozenset()

    def legacy_names(self) -> dict[str, str]:
        """Parameter names -> the names earlier versions gave them, where they differ (``Layer.legacy_names``):
        what their files, checkpoints and pickles hold."""
        return {}

    def buffer_names(self) -> frozenset[str]:
        """The entries of ``param_shapes`` that are state, not trained (BatchNorm's running statistics):
        saved, loaded and copied with the weights, but without gradient, weight decay or optimizer state."""
        return self._buffers

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor]) -> Tensor:
        """The graph of the model in training: ``forward``, except for layers with buffers, which
        append to ``updates`` the nodes that update them (computed by every training step)."""
        return self.forward(x, params)

    # ---- building -------------------------------------------------------------------------------------
    @property
    def built(self) -> bool:
        return self.input_shape is not None

    def build(self: _N, input_shape: Sequence[int], seed: int | None = 0) -> _N:
        """Fix the input shape (batch axis excluded) and initialise the weights from ``seed``."""
        rng = np.random.default_rng(seed)
        return self._build(input_shape, lambda name, shape: self._init_param(name, shape, rng))

    def build_with_weights(self: _N, input_shape: Sequence[int], weights: Mapping[str, Weight]) -> _N:
        """Fix the input shape and take ``weights`` as the parameters: exactly the names and shapes the
        network has for ``input_shape`` (ValueError otherwise, before anything is kept); a ``Quantized``
        value keeps its parameter quantized (frozen)."""
        shapes = self.shapes_for(input_shape)
        if not isinstance(weights, dict) or shapes.keys() != weights.keys():
            given = sorted(weights) if isinstance(weights, dict) else type(weights).__name__
            raise ValueError(f"this {type(self).__name__} has the parameters {sorted(shapes)}, the weights given "
                             f"are {given}{CONFIG_HINT}")
        return self._build(input_shape, lambda name, shape: weights[name])

    def shapes_for(self, input_shape: Sequence[int]) -> dict[str, tuple[int, ...]]:
        """The parameter shapes the network has when built for ``input_shape``; no weights are made (a
        file's claims are checked against these before any memory is allocated)."""
        return self._checked_shapes(input_shape)[1].tensors

    def output_shape_for(self, sample_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The per-sample output shape of the built network for samples of ``sample_shape`` (its input
        shape, or another one its parameters fit: a language model's shorter sequence); ValueError when
        that shape would need other parameters."""
        self.require_built()
        if sample_shape == self.input_shape:
            assert self.output_shape is not None  # built
            return self.output_shape
        shapes = self._build_shapes(tuple(sample_shape))
        if shapes.tensors != self.param_shapes:
            raise ValueError(f"samples of shape {sample_shape} need other parameters than this model's, built for "
                             f"{self.input_shape}")
        return shapes.output

    def _checked_shapes(self, input_shape: Sequence[int]) -> tuple[tuple[int, ...], NetworkShapes]:
        input_shape = tuple(input_shape)
        if not 1 <= len(input_shape) <= MAX_SAMPLE_AXES:
            raise ValueError(f"input_shape must have 1 to {MAX_SAMPLE_AXES} positive entries (batch axis excluded), "
                             f"got {input_shape}")
        input_shape = tuple(check_int("input_shape entries", d) for d in input_shape)
        shapes = self._build_shapes(input_shape)
        for name in shapes.tensors:
            check_param_name(name)
        if len(shapes.output) not in (1, 2):
            raise ValueError(f"the model's output must be (batch, features), or (batch, steps, features) for a "
                             f"sequence, got per-sample shape {shapes.output}; end it with Flatten() or Linear(...)")
        return input_shape, shapes

    def _build(self: _N, input_shape: Sequence[int], init: Callable[[str, tuple[int, ...]], Weight]) -> _N:
        input_shape, shapes = self._checked_shapes(input_shape)
        weights = {name: checked_weight(name, init(name, shape), shape) for name, shape in shapes.tensors.items()}
        check_quantizable(weights, self.quantizable())
        with self.lock:  # never under another thread's call: it would free the weights that call uses
            self.check_not_busy("build")
            self.input_shape, self.output_shape, self.param_shapes = input_shape, shapes.output, shapes.tensors
            self._buffers, self._step_inputs = shapes.buffers, shapes.step_inputs
            self._drop_store()
            self._weights = weights
            self._quantized = quantized_types(weights)
            self._frozen = self._frozen & (shapes.tensors.keys() - self._quantized.keys())
        return self

    def ensure_built(self, input_shape: Sequence[int], seed: int | None = 0) -> None:
        """Build for ``input_shape`` unless built (under the lock: one of two threads), else check it."""
        input_shape = tuple(input_shape)
        with self.lock:
            if not self.built:
                self.build(input_shape, seed)
            elif input_shape != self.input_shape:
                raise ValueError(f"the model was built for samples of shape {self.input_shape}, got {input_shape}")

    def require_built(self) -> None:
        if not self.built:
            raise ValueError("the model is not built yet: call build(input_shape) or fit() first")

    # ---- weights ----------------------------------------------------------------------------------------
    def get_weights(self) -> dict[str, Weight]:
        """A copy of every parameter as float32 numpy arrays, by name (once another thread's call ends);
        a parameter kept quantized as a ``Quantized`` (its ``dequantize()`` gives float32 values)."""
        with self.lock:
            self.require_built()
            if self._store is not None:
                return self._store.get()
            assert self._weights is not None  # built: the weights are in the store or here
            return {k: v.copy() for k, v in self._weights.items()}

    def set_weights(self, weights: Mapping[str, Weight]) -> None:
        """Replace parameters (all or some) from numpy arrays of the exact shapes (after the running
        call of another thread, a fit included, has ended). A ``Quantized`` value keeps its parameter
        quantized (frozen), a float32 array makes it a trained float32 parameter again."""
        self.require_built()
        if not isinstance(weights, dict):
            raise TypeError(f"weights must be a dict name -> array, got {type(weights).__name__}")
        clean: dict[str, Weight] = {}
        for name, value in weights.items():
            if name not in self.param_shapes:
                raise ValueError(f"unknown parameter {name!r}; the model has {list(self.param_shapes)}")
            clean[name] = checked_weight(name, value, self.param_shapes[name])
        check_quantizable(clean, self.quantizable())
        with self.lock:
            quantized = {**{n: t for n, t in self._quantized.items() if n not in clean}, **quantized_types(clean)}
            if quantized != self._quantized or (self._store is not None and clean.keys() & self._store.read_only):
                # parameters change type, or leave a file's read-only memory: the store is made anew at
                # the next use (graphs over the old one are dropped: forward caches check their store)
                self.check_not_busy("set_weights")
                self._drop_store()
                self._quantized = quantized
                self._frozen -= quantized.keys()
            if self._store is not None:
                self._store.set(clean)
            else:
                assert self._weights is not None  # built: the weights are in the store or here
                self._weights.update({k: v.copy() for k, v in clean.items()})

    def count_params(self) -> int:
        return int(sum(np.prod(s) for s in self.param_shapes.values()))

    def params_on(self, backend: Backend) -> ParamStore:
        """The parameters as ggml tensors on ``backend`` (moved there through numpy if elsewhere)."""
        self.require_built()
        if self._store is not None and self._store.backend is backend:
            return self._store
        # the arrays themselves where the weights are in numpy (no copy of the model in memory)
        weights = self._weights if self._store is None else self.get_weights()
        assert weights is not None  # built: the weights are in the store or here
        self._drop_store()
        store = ParamStore(self.param_shapes, backend, self.buffer_names(), self._quantized, self._frozen)
        store.fill(weights)
        self._store, self._weights = store, None
        return store

    def _drop_store(self) -> None:
        if self._store is not None:
            self._weights = self._store.get()
            self._store.close()
            self._store = None

    # ---- native resources -----------------------------------------------------------------------------
    def check_not_busy(self, what: str) -> None:
        """RuntimeError where ``what`` (build, close) must wait: a subclass says when its parameter buffer
        is pinned by a running computation (training's, in ``training.trainable``); here never."""

    def close(self) -> None:
        """Free the ggml memory of the weights (they stay available in numpy; using the network again
        re-creates what it needs). Idempotent. Waits for calls of other threads that use the network
        to end."""
        with self.lock:
            self.check_not_busy("close")
            self._drop_store()

    def __enter__(self: _N) -> _N:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- copies (``restoring.Copyable``) -------------------------------------------------------------
    def _copied_state(self) -> dict[str, Any]:
        """What copies and pickles keep besides architecture and weights, by name (a subclass adds to it)."""
        return {"loss": self.loss, "frozen": sorted(self._frozen) or None, "file_keys": self.file_keys or None}

    def _restore_copied_state(self, state: dict[str, Any]) -> None:
        """Take ``_copied_state``'s dict back in a copy (ValueError for state this class does not keep:
        it would be lost)."""
        self.loss, self.file_keys = state.get("loss"), dict(state.get("file_keys") or {})
        if state.get("frozen"):
            self.freeze(*state["frozen"])
        kept = sorted(k for k, v in state.items() if v is not None and k not in ("loss", "frozen", "file_keys"))
        if kept:
            raise ValueError(f"a {type(self).__name__} keeps no {kept}")

    def summary(self, print_fn: Callable[[str], object] | None = None) -> str:
        """A Keras-like table of the built model: one row per layer (name and type, output shape with
        the batch axis as None, parameter count, parameter names and shapes), then the totals.

        Returns the table; ``print_fn`` (``print`` for instance), if given, is also called with each
        line, as Keras's is. Unlike Keras nothing is printed by default, so ``print(model.summary())``
        prints the table once. ValueError if the model is not built (no shapes are known yet).
        Subclasses give the rows through ``_summary_rows()``: ``(label, output shape or text,
        parameter names)`` each."""
        if not self.built:
            raise ValueError("This model has not yet been built: call build(input_shape) or fit() first, "
                             "or pass input_shape to the constructor")
        lines = summary_lines(type(self).__name__, self._summary_rows(), self.param_shapes,
                              self.buffer_names() | self.frozen(), self._quantized)
        if print_fn is not None:
            for text in lines:
                print_fn(text)
        return "\n".join(lines)


def check_network(obj: object) -> Network:
    """TypeError unless ``obj`` is a pyggml_opt model (a Network)."""
    if not isinstance(obj, Network):
        raise TypeError(f"model must be a pyggml_opt model, got {type(obj).__name__}")
    return obj
