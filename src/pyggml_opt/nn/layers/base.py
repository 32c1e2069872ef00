"""The ``Layer`` base class every layer of ``Sequential`` derives from."""
from __future__ import annotations

from typing import NoReturn

import numpy as np

from ..ops import Tensor


class Layer:
    """Base class. Subclasses set ``params`` (name -> shape) in ``output_shape`` and implement ``forward``.

    ``input_dtype`` "int32" marks a layer that takes integer ids (Embedding): only the first layer of
    a model may, and the model's input is then int32. ``buffer_shapes`` (name -> shape) declares state
    that is saved with the model but not trained (BatchNorm's running statistics): it comes to
    ``forward`` among the parameters, starts at ``init``'s values and is changed only by the nodes
    ``forward_train`` returns."""

    input_dtype: str | None = None
    # Padding masks (Keras's masking): the first layer may derive one from the model input
    # (``input_mask``: Embedding(mask_zero=True)); it passes through the layers that keep the steps
    # axis as it is (``keeps_mask``) and reaches those that use it (``uses_mask``) in ``forward``'s
    # params as "padding", (n, T), 1 for a token and 0 for padding. Any other layer drops it.
    keeps_mask = False
    uses_mask = False

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.param_shapes: dict[str, tuple[int, ...]] = {}
        # per-sample shapes of the inputs a training step fills anew (a dropout mask), set with
        # param_shapes; the training graph passes them to forward among params, other graphs do not
        self.step_inputs: dict[str, tuple[int, ...]] = {}
        # non-trainable state saved with the model (no gradient, no optimizer state)
        self.buffer_shapes: dict[str, tuple[int, ...]] = {}

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Values of step input ``name`` for one training step, of ``shape`` (batch first)."""
        raise NotImplementedError

    def check_input(self, x: np.ndarray) -> None:
        """ValueError for input values this layer cannot take (called with the whole input array)."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return input_shape

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.zeros(shape, np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor]) -> Tensor:
        """The layer in the training graph: ``forward`` unless the layer has buffers to update, in which
        case it appends to ``updates`` the nodes that write them (ggml_cpy into the buffer tensors),
        which the training graph computes at every step besides its outputs."""
        return self.forward(x, params)

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


def own_tensors(layer: Layer, prefix: str, params: dict[str, Tensor], padding: Tensor | None) -> dict[str, Tensor]:
    """The tensors of ``params`` (a model's or a block's) that belong to ``layer``, whose names there
    start with ``prefix``, by the layer's own names: parameters, buffers, the step inputs the graph has
    (training graphs only), and the padding mask if the layer uses it."""
    own = {p: params[prefix + p] for p in (*layer.param_shapes, *layer.buffer_shapes)}
    own.update({p: params[prefix + p] for p in layer.step_inputs if prefix + p in params})
    if padding is not None and layer.uses_mask:
        own["padding"] = padding
    return own
