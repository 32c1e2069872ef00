"""The ``Layer`` base class every layer of ``Sequential`` derives from, and ``LayerShapes``, what a
layer has for one input shape."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, Mapping, NoReturn, Sequence

import numpy as np

from ..ops import Tensor

Shapes = Mapping[str, tuple[int, ...]]  # name -> shape (numpy order, batch axis excluded where per sample)


@dataclass(frozen=True)
class SequenceState:
    """What a layer over sequences sees besides its input and its parameters, given to ``forward`` as
    ``state`` when the layer's ``forward`` takes that argument (as Keras passes ``mask`` to a ``call``
    that takes one): the model input's padding mask (``padding``, (n, T), 1 for a token and 0 for
    padding; None without one) and, in a decoding graph (``nn/decoding.py``), the new steps' int32
    ``positions`` (T,), the ``kv_mask`` over the cached rows and the key / value ``caches`` of the
    attention layers, named by the layer's path ("blk0.attn.k_cache"); ``within`` narrows them to a
    sublayer's, so that an attention layer finds its own as "k_cache" / "v_cache". ``last_steps``: a
    decoding graph that wants the outputs of its last steps only (a prompt's next token): a model may
    drop the other steps where all that follows computes each step alone (``Layer.decoding`` "steps").
    In packed windows (several documents per sequence), ``positions`` are int32 (n, T), restarting at
    each document, and ``documents`` the additive mask (n, 1, T, T) that keeps each document's steps
    from attending to another's (``ops.document_mask``). ``window_masks``: in a decoding graph, for each
    sliding window of the model's attention layers, the ``kv_mask`` that also hides the rows that many
    steps or more before each new step."""

    padding: Tensor | None = None
    positions: Tensor | None = None
    documents: Tensor | None = None
    kv_mask: Tensor | None = None
    window_masks: Mapping[int, Tensor] = field(default_factory=dict)
    caches: Mapping[str, Tensor] = field(default_factory=dict)
    last_steps: int | None = None

    def within(self, prefix: str) -> "SequenceState":
        """The state a sublayer named ``prefix`` ("attn.") sees: its own caches."""
        start = len(prefix)
        return dataclasses.replace(self, caches={k[start:]: v for k, v in self.caches.items() if k.startswith(prefix)})

    def without_padding(self) -> "SequenceState":
        return dataclasses.replace(self, padding=None)


def run_layer(layer: "Layer", x: Tensor, params: dict[str, Tensor], state: SequenceState,
              updates: list[Tensor] | None) -> Tensor:
    """``layer`` applied to ``x`` with its own ``params``: ``forward``, or in the training graph (``updates``
    collects buffer updates) ``forward_train``; ``state`` passed where the layer's ``forward`` takes it."""
    extra: dict[str, Any] = {"state": state} if layer.takes_state else {}
    return layer.forward(x, params, **extra) if updates is None else layer.forward_train(x, params, updates, **extra)


@dataclass(frozen=True)
class LayerShapes:
    """What ``Layer.infer`` returns for one input shape (batch axis excluded): the ``output`` shape, the
    trained ``params`` and the ``buffers`` (saved with the model, not trained: BatchNorm's running
    statistics), by the layer's own names, and the ``step_inputs``: per-sample shapes of the inputs a
    training step fills anew (a dropout mask; the training graph passes them to ``forward`` among the
    parameters, other graphs do not)."""

    output: tuple[int, ...]
    params: Shapes = field(default_factory=dict)
    buffers: Shapes = field(default_factory=dict)
    step_inputs: Shapes = field(default_factory=dict)

    @property
    def tensors(self) -> dict[str, tuple[int, ...]]:
        """Parameters then buffers: every tensor the model keeps for the layer."""
        return {**self.params, **self.buffers}


def prefixed(prefix: str, shapes: Shapes) -> dict[str, tuple[int, ...]]:
    """``shapes`` with every name behind ``prefix`` (a layer's names as a model or a block has them)."""
    return {prefix + name: shape for name, shape in shapes.items()}


def combined(parts: Sequence[tuple[str, LayerShapes]], output: tuple[int, ...]) -> LayerShapes:
    """The shapes of several layers as one (a block's sublayers, a model's layers): each part's params,
    buffers and step inputs under its prefix, in the order of ``parts``; ``output``, the whole's."""
    def gather(kind: str) -> dict[str, tuple[int, ...]]:
        return {name: shape for prefix, s in parts for name, shape in prefixed(prefix, getattr(s, kind)).items()}

    return LayerShapes(output, gather("params"), gather("buffers"), gather("step_inputs"))


class Layer:
    """Base class. Subclasses implement ``infer`` (a pure function of the input shape: output shape,
    parameter, buffer and step-input shapes) and ``forward``; ``init`` gives parameters their values.

    ``input_dtype`` "int32" marks a layer that takes integer ids (Embedding): only the first layer of
    a model may, and the model's input is then int32. Buffers (``LayerShapes.buffers``: BatchNorm's
    running statistics) come to ``forward`` among the parameters, start at ``init``'s values and are
    changed only by the nodes ``forward_train`` returns. A layer keeps no shapes of its own: the
    network that holds it keeps what ``infer`` returned for the input shape it was built for."""

    input_dtype: str | None = None
    # Padding masks (Keras's masking): the first layer may derive one from the model input
    # (``input_mask``: Embedding(mask_zero=True)); it passes through the layers that keep the steps
    # axis as it is (``keeps_mask``) and reaches, as ``SequenceState.padding``, those whose ``forward``
    # takes a ``state`` argument. Any other layer drops it.
    keeps_mask = False
    # Decoding with a key / value cache (nn/decoding.py) runs a model on its new steps only: "steps"
    # marks a layer whose output at a step depends on its input at that step alone (it runs as it
    # is), "positions" one that reads the steps' positions (``state.positions``, int32 (T,)), "cache"
    # an attention layer keeping ``kv_width`` keys and values per step (``state.caches``
    # "k_cache" / "v_cache", ``state.positions``, ``state.kv_mask``); a Block decodes when its
    # sublayers do. None: not known to, so generate recomputes such a model's whole window per token.
    decoding: str | None = None
    # Own names of the parameters the layer uses only as the matrix of a MUL_MAT or the table of a
    # GET_ROWS, which ggml computes with in its quantized types: a model may keep them quantized
    # (frozen), as a Q8_0 / Q4_0 file stores them. Other parameters are float32.
    quantizable: frozenset[str] = frozenset()

    # whether ``forward`` takes a ``state`` argument (a SequenceState): set for each subclass from its signature
    takes_state = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.takes_state = "state" in inspect.signature(cls.forward).parameters
        if "output_shape" in cls.__dict__:  # the protocol before LayerShapes: it would build no parameters
            raise TypeError(f"{cls.__name__} overrides output_shape: a layer implements infer(input_shape) -> "
                            "LayerShapes (output, params, buffers, step_inputs) instead; output_shape is a query")

    def __init__(self, name: str | None = None) -> None:
        self.name = name

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        """The output shape and the tensors of the layer for ``input_shape`` (batch axis excluded);
        ValueError naming the layer if the input does not fit (``_fail``). Pure: changes nothing."""
        return LayerShapes(tuple(input_shape))

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one sample's output for ``input_shape`` (``infer(input_shape).output``)."""
        return self.infer(input_shape).output

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Values of step input ``name`` for one training step, of ``shape`` (batch first)."""
        raise NotImplementedError

    def check_input(self, x: np.ndarray) -> None:
        """ValueError for input values this layer cannot take (called with the whole input array)."""

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.zeros(shape, np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor], **state: Any) -> Tensor:
        """The layer in the training graph: ``forward`` unless the layer has buffers to update, in which
        case it appends to ``updates`` the nodes that write them (ggml_cpy into the buffer tensors),
        which the training graph computes at every step besides its outputs. ``state``: the
        ``SequenceState`` of a layer whose ``forward`` takes one."""
        return self.forward(x, params, **state)

    def legacy_names(self) -> dict[str, str]:
        """Own parameter names -> the names earlier versions gave them, where they differ: what the
        files, checkpoints and pickles of those versions hold."""
        return {}

    def input_mask(self, x: Tensor) -> Tensor | None:
        """The padding mask (n, T) of the model input ``x``, for a first layer that makes one."""
        return None

    def get_config(self) -> dict:
        """Constructor arguments (JSON-ready), for saving and copying the architecture."""
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict) -> "Layer":
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"

    def _fail(self, input_shape: tuple[int, ...], expected: str) -> NoReturn:
        raise ValueError(f"{self!r}{' ' + repr(self.name) if self.name else ''}: input shape "
                         f"{tuple(input_shape)} (batch axis excluded) does not fit: expected {expected}")


def own_tensors(prefix: str, params: dict[str, Tensor]) -> dict[str, Tensor]:
    """The tensors of ``params`` (a model's or a block's) whose names there start with ``prefix``, by
    the layer's own names: its parameters, buffers and the step inputs the graph has (training graphs only)."""
    start = len(prefix)
    return {name[start:]: t for name, t in params.items() if name.startswith(prefix)}
